-- task_counts was kept by a row-level trigger: a statement that inserts, updates or deletes many
-- tasks updated the same few counter rows once per task inside one transaction, each update
-- walking past the versions the transaction had already made (a single INSERT … SELECT of
-- 1,000,000 tasks did not finish in 45 minutes). Statement-level triggers with transition tables
-- apply each statement's net change per (agent, status, shard) once, in key order (so that
-- concurrent statements lock counter rows in the same order).
DROP TRIGGER IF EXISTS tasks_count ON tasks;
DROP FUNCTION IF EXISTS agentrun_count_tasks();

CREATE OR REPLACE FUNCTION agentrun_count_tasks_inserted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO task_counts (agent_id, status, shard, n)
  SELECT agent_id, status, abs(hashtext(id)) % 16, count(*) FROM new_rows
  GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
  ON CONFLICT (agent_id, status, shard) DO UPDATE SET n = task_counts.n + EXCLUDED.n;
  RETURN NULL;
END;
$$;

CREATE OR REPLACE FUNCTION agentrun_count_tasks_deleted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO task_counts (agent_id, status, shard, n)
  SELECT agent_id, status, abs(hashtext(id)) % 16, -count(*) FROM old_rows
  GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
  ON CONFLICT (agent_id, status, shard) DO UPDATE SET n = task_counts.n + EXCLUDED.n;
  RETURN NULL;
END;
$$;

-- Updates that change neither status nor agent (most of them) net to zero and write nothing.
CREATE OR REPLACE FUNCTION agentrun_count_tasks_updated() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO task_counts (agent_id, status, shard, n)
  SELECT agent_id, status, shard, sum(d) FROM (
    SELECT agent_id, status, abs(hashtext(id)) % 16 AS shard, -1 AS d FROM old_rows
    UNION ALL
    SELECT agent_id, status, abs(hashtext(id)) % 16, 1 FROM new_rows
  ) AS changes
  GROUP BY 1, 2, 3 HAVING sum(d) <> 0 ORDER BY 1, 2, 3
  ON CONFLICT (agent_id, status, shard) DO UPDATE SET n = task_counts.n + EXCLUDED.n;
  RETURN NULL;
END;
$$;

CREATE TRIGGER tasks_count_insert AFTER INSERT ON tasks
REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION agentrun_count_tasks_inserted();
CREATE TRIGGER tasks_count_update AFTER UPDATE ON tasks
REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION agentrun_count_tasks_updated();
CREATE TRIGGER tasks_count_delete AFTER DELETE ON tasks
REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION agentrun_count_tasks_deleted();
