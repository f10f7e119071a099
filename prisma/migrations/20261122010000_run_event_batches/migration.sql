-- A run's events were stored one row each: with a streamed answer of 20 chunks, the end of the run
-- inserted 21 rows, each with its primary-key entry and its foreign-key check (about 0.4 ms of
-- PostgreSQL CPU per run in pgbench of the three run functions, a sixth of their cost). They are
-- now stored in the batches they are written in: run_started when the run is accepted, what the
-- worker flushes during a long run, and the rest with the terminal event; readers merge a run's
-- batches by seq. The two functions that stored events are restated with the batch insert.

-- CreateTable
CREATE TABLE "run_event_batches" (
    "run_id" TEXT NOT NULL,
    "first_seq" INTEGER NOT NULL,
    "last_seq" INTEGER NOT NULL,
    "events" JSONB NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "run_event_batches_pkey" PRIMARY KEY ("run_id","first_seq")
);

-- AddForeignKey
ALTER TABLE "run_event_batches" ADD CONSTRAINT "run_event_batches_run_id_fkey" FOREIGN KEY ("run_id") REFERENCES "runs"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- The stored events, one batch per run.
INSERT INTO "run_event_batches" ("run_id", "first_seq", "last_seq", "events", "created_at")
SELECT "run_id", min("seq"), max("seq"), jsonb_agg("data" ORDER BY "seq"), min("created_at")
FROM "run_events" GROUP BY "run_id";

-- DropTable
DROP TABLE "run_events";

CREATE OR REPLACE FUNCTION agentrun_create_run(
  p_run_id text,
  p_task_id text,
  p_new_task boolean,
  p_org_id text,
  p_agent_id text,
  p_query text,
  p_title text,
  p_user_id text,
  p_metadata jsonb,
  p_context jsonb,
  p_visitor_id text,
  p_reservation integer,
  p_ledger_id text,
  p_started jsonb
) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  t record;
  balance integer;
BEGIN
  -- The task comes first (the run references it); its counter rows are locked from here on.
  IF p_new_task THEN
    INSERT INTO tasks (id, org_id, agent_id, title, status, user_id, metadata, visitor_id, active_run_id, run_count, credits_used, created_at, updated_at)
    VALUES (p_task_id, p_org_id, p_agent_id, p_title, 'pending', p_user_id, p_metadata, p_visitor_id, p_run_id, 1, 0, now(), now());
  ELSE
    UPDATE tasks SET active_run_id = p_run_id, run_count = run_count + 1, status = 'pending', updated_at = now()
    WHERE id = p_task_id AND org_id = p_org_id AND agent_id = p_agent_id AND active_run_id IS NULL
      AND (p_visitor_id IS NULL OR visitor_id = p_visitor_id);
    IF NOT FOUND THEN
      SELECT org_id, agent_id, visitor_id, active_run_id INTO t FROM tasks WHERE id = p_task_id;
      IF NOT FOUND THEN
        RAISE EXCEPTION 'task_not_found' USING ERRCODE = 'AR404';
      END IF;
      IF t.org_id <> p_org_id OR t.agent_id <> p_agent_id OR (p_visitor_id IS NOT NULL AND t.visitor_id IS DISTINCT FROM p_visitor_id) THEN
        RAISE EXCEPTION 'forbidden' USING ERRCODE = 'AR403';
      END IF;
      RAISE EXCEPTION 'run_in_progress' USING ERRCODE = 'AR409', DETAIL = t.active_run_id;
    END IF;
  END IF;

  INSERT INTO runs (id, task_id, org_id, agent_id, status, query, context, credits_reserved, last_seq, created_at)
  VALUES (p_run_id, p_task_id, p_org_id, p_agent_id, 'queued', p_query, p_context, p_reservation, 1, now());
  INSERT INTO run_event_batches (run_id, first_seq, last_seq, events, created_at)
  VALUES (p_run_id, 1, 1, jsonb_build_array(p_started), now());

  -- The reservation last: a refusal still undoes everything above.
  UPDATE organizations SET credit_balance = credit_balance - p_reservation, updated_at = now()
  WHERE id = p_org_id AND credit_balance > 0 AND credit_balance >= p_reservation
  RETURNING credit_balance INTO balance;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'insufficient_credits' USING ERRCODE = 'AR402';
  END IF;
  IF p_reservation > 0 THEN
    INSERT INTO credit_ledger (id, org_id, run_id, amount, reason, balance_after, created_at)
    VALUES (p_ledger_id, p_org_id, p_run_id, -p_reservation, 'run_reservation', balance, now());
  END IF;
  RETURN balance;
END;
$$;

-- agentrun_finish_run also gets p_only_queued: ending a run that no worker has claimed yet (a
-- cancel of a queued run, a run whose job was lost) must not end one that a worker claimed in the
-- meantime, which would go on executing a run already ended.
DROP FUNCTION agentrun_finish_run(text, "RunStatus", text, integer, integer, integer, integer, text, text, jsonb, jsonb, jsonb, text);

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
  p_only_queued boolean
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
  SELECT status, org_id, task_id, credits_reserved, created_at, started_at INTO r
  FROM runs WHERE id = p_run_id FOR UPDATE;
  IF NOT FOUND OR r.status NOT IN ('queued', 'running') OR (p_only_queued AND r.status <> 'queued') THEN
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
