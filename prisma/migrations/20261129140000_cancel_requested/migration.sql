-- A cancel is recorded on the run (cancel_requested_at) as well as flagged in Redis: a run whose
-- worker hears of it too late (its last model call answering meanwhile) still ends cancelled,
-- so that a cancel answered with the run `running` always ends it so (unless it fails). The end
-- is decided by agentrun_finish_run under the run's row lock, where the mark is read; the
-- cancel sets it only while the run is in progress. (agentrun_finish_run otherwise as in
-- 20261128020000_finish_run_lost_claim.)

ALTER TABLE "runs" ADD COLUMN "cancel_requested_at" TIMESTAMPTZ(3);

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
  p_ledger_id text,
  p_only_queued boolean,
  p_worker_id text DEFAULT NULL
) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  r record;
  duration integer;
  terminal jsonb := p_terminal;
  delta bigint;
  balance integer;
  events jsonb;
  user_at timestamptz;
  to_store jsonb := p_messages;
  final_status "RunStatus" := p_status;
BEGIN
  SELECT status, org_id, task_id, credits_reserved, created_at, started_at, worker_id, cancel_requested_at INTO r
  FROM runs WHERE id = p_run_id FOR UPDATE;
  IF NOT FOUND OR r.status NOT IN ('queued', 'running') OR (p_only_queued AND r.status <> 'queued') THEN
    RETURN NULL;
  END IF;
  -- A writer ends the run only while the run is still its own, checked under the row lock: a
  -- run taken over meanwhile (worker_id changed) is the taker's to end. A queued run without a
  -- worker is the writer's whose claim was lost.
  IF p_worker_id IS NOT NULL AND r.worker_id IS DISTINCT FROM p_worker_id
    AND NOT (r.status = 'queued' AND r.worker_id IS NULL) THEN
    RETURN NULL;
  END IF;

  -- A cancel asked for before this end (the cancel answered the run as running) is kept, though
  -- the run got to its end before its worker heard of it: it ends cancelled, with what it said,
  -- paying for what it used, as a run stopped a moment earlier would.
  IF p_status = 'completed' AND r.cancel_requested_at IS NOT NULL THEN
    final_status := 'cancelled';
    terminal := jsonb_build_object('seq', terminal->'seq', 'type', 'run_cancelled', 'run_id', p_run_id);
  END IF;

  duration := least(greatest(floor(extract(epoch FROM (clock_timestamp() - coalesce(r.started_at, r.created_at))) * 1000), 0), 2147483647);
  IF terminal->>'type' = 'run_completed' THEN
    terminal := terminal || jsonb_build_object('credits_used', p_cost, 'duration_ms', duration);
  END IF;

  UPDATE runs SET status = final_status, output = p_output, credits_used = p_cost,
    prompt_tokens = p_prompt_tokens, completion_tokens = p_completion_tokens, tool_call_count = p_tool_calls,
    duration_ms = duration, error_code = p_error_code, error_message = p_error_message,
    completed_at = now(), last_seq = (terminal->>'seq')::integer, worker_id = coalesce(r.worker_id, p_worker_id)
  WHERE id = p_run_id;

  -- The events not stored yet and the terminal one, as one batch. A batch with the same first
  -- seq is there when an earlier write of these events reported an error but committed: this
  -- one holds all of its events and more.
  events := p_events || jsonb_build_array(terminal);
  INSERT INTO run_event_batches AS b (run_id, first_seq, last_seq, events, created_at)
  VALUES (p_run_id, (events->0->>'seq')::integer, (terminal->>'seq')::integer, events, now())
  ON CONFLICT (run_id, first_seq) DO UPDATE SET last_seq = EXCLUDED.last_seq, events = EXCLUDED.events
  WHERE b.last_seq < EXCLUDED.last_seq;

  -- The user's query was stored when the run was accepted (runs accepted before that was so
  -- bring it along): it is not stored twice.
  SELECT m.created_at INTO user_at FROM messages m WHERE m.run_id = p_run_id AND m.role = 'user' LIMIT 1;
  IF user_at IS NOT NULL THEN
    SELECT coalesce(jsonb_agg(e ORDER BY i), '[]') INTO to_store
    FROM jsonb_array_elements(p_messages) WITH ORDINALITY AS x(e, i) WHERE e->>'role' <> 'user';
  END IF;
  -- Distinct, ordered timestamps (1 ms apart, the column's precision) keep history order stable,
  -- all of them after the user's query.
  INSERT INTO messages (id, task_id, run_id, role, content, tool, action, tool_call_id, params, result, created_at)
  SELECT m->>'id', r.task_id, p_run_id, (m->>'role')::"MessageRole", coalesce(m->>'content', ''),
    m->>'tool', m->>'action', m->>'tool_call_id', m->'params', m->'result',
    greatest(date_trunc('milliseconds', now()) - make_interval(secs => (jsonb_array_length(to_store) - i + 1) / 1000.0),
      user_at + make_interval(secs => i / 1000.0))
  FROM jsonb_array_elements(to_store) WITH ORDINALITY AS x(m, i);

  -- The shared rows last. A cancelled run leaves its task completed; the task is freed only if
  -- this run still holds it.
  UPDATE tasks SET
    status = (CASE WHEN final_status = 'failed' THEN 'failed' ELSE 'completed' END)::"TaskStatus",
    credits_used = least(credits_used::bigint + p_cost, 2147483647)::integer,
    active_run_id = CASE WHEN active_run_id = p_run_id THEN NULL ELSE active_run_id END,
    updated_at = now()
  WHERE id = r.task_id;

  -- Charge what the run cost beyond its reservation, or refund what it did not use, as far as
  -- the balance's integer range goes (concurrent runs at extreme prices could take it past):
  -- the run ends all the same, and the ledger records what the balance moved.
  SELECT credit_balance INTO balance FROM organizations WHERE id = r.org_id FOR UPDATE;
  IF FOUND THEN
    delta := greatest(least(r.credits_reserved::bigint - p_cost, 2147483647 - balance::bigint), -2147483647 - balance::bigint);
    IF delta <> 0 THEN
      UPDATE organizations SET credit_balance = (credit_balance + delta)::integer, updated_at = now()
      WHERE id = r.org_id RETURNING credit_balance INTO balance;
      INSERT INTO credit_ledger (id, org_id, run_id, amount, reason, balance_after, created_at)
      VALUES (p_ledger_id, r.org_id, p_run_id, delta::integer,
        (CASE WHEN delta < 0 THEN 'run_charge' ELSE 'run_refund' END)::"LedgerReason", balance, now());
    END IF;
  END IF;

  RETURN terminal;
END;
$$;
