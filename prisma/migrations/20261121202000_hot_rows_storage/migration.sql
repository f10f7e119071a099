-- Every run updates its organization's row twice (credit reservation and settlement) and its
-- agent's task counters several times. Free space in their pages keeps those updates HOT (no
-- index entries, versions pruned on the page itself), and vacuuming these small tables after a
-- fixed number of dead versions, instead of a fraction of their size, keeps a busy tenant's row
-- from dragging a long chain of dead versions behind it.
ALTER TABLE "organizations" SET (fillfactor = 50, autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000, autovacuum_analyze_scale_factor = 0.2);
ALTER TABLE "task_counts" SET (fillfactor = 50, autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000);
