-- A worker's claim of a run, the first thing it does with every job: move a queued run to
-- running (and its task with it) and return what execution needs, including the task's recent
-- history, in one round trip. As a function its plans are prepared once per connection instead
-- of on every call. Returns no row when the run is not queued (already claimed, ended or gone).
-- The claim commits without waiting for its WAL flush: should PostgreSQL crash and lose it, the
-- run is simply queued again (agentrun_finish_run accepts queued runs, and a retried job claims
-- it anew), while the run's acceptance and its end are always durable.
CREATE OR REPLACE FUNCTION agentrun_claim_run(p_run_id text, p_worker_id text, p_history_limit integer)
RETURNS TABLE (id text, task_id text, org_id text, agent_id text, query text, context jsonb, task_user_id text, history json)
LANGUAGE plpgsql AS $$
DECLARE
  r record;
BEGIN
  PERFORM set_config('synchronous_commit', 'off', true);
  UPDATE runs SET status = 'running', started_at = now(), worker_id = p_worker_id
  WHERE runs.id = p_run_id AND runs.status = 'queued'
  RETURNING runs.id, runs.task_id, runs.org_id, runs.agent_id, runs.query, runs.context INTO r;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  UPDATE tasks SET status = 'running', updated_at = now()
  WHERE tasks.id = r.task_id AND tasks.active_run_id = r.id;
  RETURN QUERY SELECT r.id, r.task_id, r.org_id, r.agent_id, r.query, r.context,
    (SELECT tasks.user_id FROM tasks WHERE tasks.id = r.task_id), agentrun_task_history(r.task_id, r.id, p_history_limit);
END;
$$;

-- The last `p_limit` user and assistant messages of a task from runs other than `p_run_id`,
-- oldest first, as a JSON array of {role, content}.
CREATE OR REPLACE FUNCTION agentrun_task_history(p_task_id text, p_run_id text, p_limit integer)
RETURNS json
LANGUAGE sql STABLE AS $$
  SELECT coalesce(json_agg(json_build_object('role', h.role, 'content', h.content) ORDER BY h.created_at, h.id), '[]')
  FROM (
    SELECT m.role, m.content, m.created_at, m.id FROM messages m
    WHERE m.task_id = p_task_id AND m.role IN ('user', 'assistant') AND (m.run_id IS NULL OR m.run_id <> p_run_id)
    ORDER BY m.created_at DESC, m.id DESC LIMIT p_limit
  ) h
$$;
