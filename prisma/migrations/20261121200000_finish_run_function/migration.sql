-- Ending a run is the worker's hot path: move the run to its final status, store its messages,
-- its pending events and its terminal event, free and update the task, and settle the credits.
-- One function makes it one round trip that holds its row locks for microseconds, instead of an
-- interactive transaction of about ten statements holding a pool connection across them.
-- Returns the terminal event as stored (run_completed gains credits_used and duration_ms), or
-- NULL when the run had already ended.
CREATE OR REPLACE FUNCTION agentrun_finish_run(
  p_run_id text,
  p_status "RunStatus",
  p_output text,
  p_cost integer,
  p_prompt_tokens integer,
  p_completion_tokens integer,
  p_tool_calls integer,
  p_error_code text,
  p_error_message text,
  p_terminal jsonb,
  p_events jsonb,
  p_messages jsonb,
  p_ledger_id text
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  r record;
  duration integer;
  terminal jsonb := p_terminal;
  delta integer;
  balance integer;
  message_count integer := jsonb_array_length(p_messages);
BEGIN
  SELECT status, org_id, task_id, credits_reserved, created_at, started_at INTO r
  FROM runs WHERE id = p_run_id FOR UPDATE;
  IF NOT FOUND OR r.status NOT IN ('queued', 'running') THEN
    RETURN NULL;
  END IF;

  duration := floor(extract(epoch FROM (clock_timestamp() - coalesce(r.started_at, r.created_at))) * 1000);
  IF terminal->>'type' = 'run_completed' THEN
    terminal := terminal || jsonb_build_object('credits_used', p_cost, 'duration_ms', duration);
  END IF;

  UPDATE runs SET status = p_status, output = p_output, credits_used = p_cost,
    prompt_tokens = p_prompt_tokens, completion_tokens = p_completion_tokens, tool_call_count = p_tool_calls,
    duration_ms = duration, error_code = p_error_code, error_message = p_error_message,
    completed_at = now(), last_seq = (terminal->>'seq')::integer
  WHERE id = p_run_id;

  -- A cancelled run leaves its task completed; the task is freed only if this run still holds it.
  UPDATE tasks SET
    status = (CASE WHEN p_status = 'failed' THEN 'failed' ELSE 'completed' END)::"TaskStatus",
    credits_used = credits_used + p_cost,
    active_run_id = CASE WHEN active_run_id = p_run_id THEN NULL ELSE active_run_id END,
    updated_at = now()
  WHERE id = r.task_id;

  -- Charge what the run cost beyond its reservation, or refund what it did not use.
  delta := r.credits_reserved - p_cost;
  IF delta <> 0 THEN
    UPDATE organizations SET credit_balance = credit_balance + delta, updated_at = now()
    WHERE id = r.org_id RETURNING credit_balance INTO balance;
    IF FOUND THEN
      INSERT INTO credit_ledger (id, org_id, run_id, amount, reason, balance_after, created_at)
      VALUES (p_ledger_id, r.org_id, p_run_id, delta,
        (CASE WHEN delta < 0 THEN 'run_charge' ELSE 'run_refund' END)::"LedgerReason", balance, now());
    END IF;
  END IF;

  INSERT INTO run_events (run_id, seq, type, data, created_at)
  SELECT p_run_id, (e->>'seq')::integer, e->>'type', e, now()
  FROM jsonb_array_elements(p_events || jsonb_build_array(terminal)) AS e
  ON CONFLICT DO NOTHING;

  -- Distinct, ordered timestamps (1 ms apart, the column's precision) keep history order stable.
  INSERT INTO messages (id, task_id, run_id, role, content, tool, action, tool_call_id, params, result, created_at)
  SELECT m->>'id', r.task_id, p_run_id, (m->>'role')::"MessageRole", coalesce(m->>'content', ''),
    m->>'tool', m->>'action', m->>'tool_call_id', m->'params', m->'result',
    date_trunc('milliseconds', now()) - make_interval(secs => (message_count - i + 1) / 1000.0)
  FROM jsonb_array_elements(p_messages) WITH ORDINALITY AS x(m, i);

  RETURN terminal;
END;
$$;
