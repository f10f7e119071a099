-- agentrun_finish_run takes the ending writer's id and checks it under the run's row lock, so a
-- run taken over by another writer (see finishRun) is never ended by the one it replaced. The
-- rest of the function is unchanged.
DROP FUNCTION agentrun_finish_run(text, "RunStatus", text, integer, integer, integer, integer, text, text, jsonb, jsonb, jsonb, text, boolean);

CREATE FUNCTION agentrun_finish_run(
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
  p_ledger_id text,
  p_only_queued boolean,
  p_worker_id text DEFAULT NULL
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  r record;
  duration integer;
  terminal jsonb := p_terminal;
  delta integer;
  balance integer;
  message_count integer := jsonb_array_length(p_messages);
  events jsonb;
BEGIN
  SELECT status, org_id, task_id, credits_reserved, created_at, started_at, worker_id INTO r
  FROM runs WHERE id = p_run_id FOR UPDATE;
  IF NOT FOUND OR r.status NOT IN ('queued', 'running') OR (p_only_queued AND r.status <> 'queued') THEN
    RETURN NULL;
  END IF;
  -- A writer ends the run only while the run is still its own, checked under the row lock: a
  -- run taken over meanwhile (worker_id changed) is the taker's to end.
  IF p_worker_id IS NOT NULL AND r.worker_id IS DISTINCT FROM p_worker_id THEN
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

  -- The events not stored yet and the terminal one, as one batch. A batch with the same first
  -- seq is there when an earlier write of these events reported an error but committed: this
  -- one holds all of its events and more.
  events := p_events || jsonb_build_array(terminal);
  INSERT INTO run_event_batches AS b (run_id, first_seq, last_seq, events, created_at)
  VALUES (p_run_id, (events->0->>'seq')::integer, (terminal->>'seq')::integer, events, now())
  ON CONFLICT (run_id, first_seq) DO UPDATE SET last_seq = EXCLUDED.last_seq, events = EXCLUDED.events
  WHERE b.last_seq < EXCLUDED.last_seq;

  -- Distinct, ordered timestamps (1 ms apart, the column's precision) keep history order stable.
  INSERT INTO messages (id, task_id, run_id, role, content, tool, action, tool_call_id, params, result, created_at)
  SELECT m->>'id', r.task_id, p_run_id, (m->>'role')::"MessageRole", coalesce(m->>'content', ''),
    m->>'tool', m->>'action', m->>'tool_call_id', m->'params', m->'result',
    date_trunc('milliseconds', now()) - make_interval(secs => (message_count - i + 1) / 1000.0)
  FROM jsonb_array_elements(p_messages) WITH ORDINALITY AS x(m, i);

  -- The shared rows last. A cancelled run leaves its task completed; the task is freed only if
  -- this run still holds it.
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

  RETURN terminal;
END;
$$;
