-- A run's event writer could put the events of two failed writes back out of order, and a later
-- write then stored a batch whose first_seq was past its last_seq. Readers select the batches
-- with last_seq past their cursor, so they skipped such a batch. Its last_seq is set to the
-- highest seq it holds (first_seq, part of the key, stays as it is: readers order events by seq).
UPDATE run_event_batches b
SET last_seq = m.max_seq
FROM (
  SELECT x.run_id, x.first_seq, max((e->>'seq')::integer) AS max_seq
  FROM run_event_batches x,
    jsonb_array_elements(CASE WHEN jsonb_typeof(x.events) = 'array' THEN x.events ELSE '[]'::jsonb END) e
  WHERE x.first_seq > x.last_seq
  GROUP BY x.run_id, x.first_seq
) m
WHERE b.run_id = m.run_id AND b.first_seq = m.first_seq AND m.max_seq > b.last_seq;
