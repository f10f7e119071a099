-- A run's claim read the task's history bounded only by its count (HISTORY_MAX_MESSAGES, 50), and
-- the worker cut it to HISTORY_MAX_CHARS (100,000) afterwards: a task whose earlier answers were
-- megabytes each made every later claim build all of them (up to 50 answers of 16 MB) into one
-- json value in PostgreSQL and in the worker's memory, to keep a few. The history is now also
-- bounded here, by size: the newest messages while their text adds up to at most four times
-- p_max_chars bytes. A character as the worker counts it (a UTF-16 code unit) is at most three
-- bytes of UTF-8, and at most four in any server encoding, so this keeps every message the
-- worker's own, exact cut keeps; and a text's size in bytes is read from its header, without
-- decompressing it. The functions take the bound as a new last argument with a default (NULL:
-- no bound by size), so that a worker of the previous release calls them unchanged.

DROP FUNCTION agentrun_claim_run(text, text, integer);
DROP FUNCTION agentrun_task_history(text, text, integer);

CREATE FUNCTION agentrun_task_history(p_task_id text, p_run_id text, p_limit integer, p_max_chars integer DEFAULT NULL)
RETURNS json
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
  RETURN (
    SELECT coalesce(json_agg(json_build_object('role', h.role, 'content', h.content) ORDER BY h.created_at, h.id), '[]')
    FROM (
      SELECT m.*, sum(octet_length(m.content)) OVER (ORDER BY m.created_at DESC, m.id DESC) AS upto
      FROM (
        SELECT m.role, m.content, m.created_at, m.id FROM messages m
        WHERE m.task_id = p_task_id AND m.role IN ('user', 'assistant') AND (m.run_id IS NULL OR m.run_id <> p_run_id)
        ORDER BY m.created_at DESC, m.id DESC LIMIT p_limit
      ) m
    ) h
    WHERE p_max_chars IS NULL OR h.upto <= 4 * p_max_chars::bigint
  );
END;
$$;

CREATE FUNCTION agentrun_claim_run(p_run_id text, p_worker_id text, p_history_limit integer, p_history_max_chars integer DEFAULT NULL)
RETURNS TABLE (id text, task_id text, org_id text, agent_id text, query text, context jsonb, task_user_id text, history json)
LANGUAGE plpgsql AS $$
DECLARE
  r record;
  task_user text;
  past json;
BEGIN
  PERFORM set_config('synchronous_commit', 'off', true);
  UPDATE runs SET status = 'running', started_at = now(), worker_id = p_worker_id
  WHERE runs.id = p_run_id AND runs.status = 'queued'
  RETURNING runs.id, runs.task_id, runs.org_id, runs.agent_id, runs.query, runs.context INTO r;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  SELECT tasks.user_id INTO task_user FROM tasks WHERE tasks.id = r.task_id;
  past := agentrun_task_history(r.task_id, r.id, p_history_limit, p_history_max_chars);
  UPDATE tasks SET status = 'running', updated_at = now()
  WHERE tasks.id = r.task_id AND tasks.active_run_id = r.id;
  RETURN QUERY SELECT r.id, r.task_id, r.org_id, r.agent_id, r.query, r.context, task_user, past;
END;
$$;
