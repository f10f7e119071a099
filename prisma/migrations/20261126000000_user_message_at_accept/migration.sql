-- The user's query is stored with the run when the run is accepted, so that the task's history
-- (GET /api/messages) shows it while the run is in progress, stamped with the time it was asked.
-- agentrun_create_run takes the message's id as a new last argument; agentrun_finish_run no
-- longer stores a user message a run already has, and stamps the run's other messages after it.
-- The rest of both functions is unchanged.
DROP FUNCTION agentrun_create_run(text, text, boolean, text, text, text, text, text, jsonb, jsonb, text, integer, text, jsonb);

CREATE FUNCTION agentrun_create_run(
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
  p_started jsonb,
  p_user_message_id text DEFAULT NULL
) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  t record;
  balance integer;
  tries integer := 0;
BEGIN
  -- The task comes first (the run references it); its counter rows are locked from here on.
  IF p_new_task THEN
    INSERT INTO tasks (id, org_id, agent_id, title, status, user_id, metadata, visitor_id, active_run_id, run_count, credits_used, created_at, updated_at)
    VALUES (p_task_id, p_org_id, p_agent_id, p_title, 'pending', p_user_id, p_metadata, p_visitor_id, p_run_id, 1, 0, now(), now());
  ELSE
    LOOP
      -- A task created without a title takes it from its first run.
      UPDATE tasks SET active_run_id = p_run_id, run_count = run_count + 1, status = 'pending', updated_at = now(),
        title = CASE WHEN title = '' THEN p_title ELSE title END
      WHERE id = p_task_id AND org_id = p_org_id AND agent_id = p_agent_id AND active_run_id IS NULL
        AND (p_visitor_id IS NULL OR visitor_id = p_visitor_id);
      EXIT WHEN FOUND;
      SELECT org_id, agent_id, visitor_id, active_run_id INTO t FROM tasks WHERE id = p_task_id;
      IF NOT FOUND THEN
        RAISE EXCEPTION 'task_not_found' USING ERRCODE = 'AR404';
      END IF;
      IF t.org_id <> p_org_id OR t.agent_id <> p_agent_id OR (p_visitor_id IS NOT NULL AND t.visitor_id IS DISTINCT FROM p_visitor_id) THEN
        RAISE EXCEPTION 'forbidden' USING ERRCODE = 'AR403';
      END IF;
      IF t.active_run_id IS NOT NULL THEN
        RAISE EXCEPTION 'run_in_progress' USING ERRCODE = 'AR409', DETAIL = t.active_run_id;
      END IF;
      -- The run holding the task ended between the update and this read: try again.
      tries := tries + 1;
      IF tries >= 3 THEN
        RAISE EXCEPTION 'run_in_progress' USING ERRCODE = 'AR409', DETAIL = '';
      END IF;
    END LOOP;
  END IF;

  INSERT INTO runs (id, task_id, org_id, agent_id, status, query, context, credits_reserved, last_seq, created_at)
  VALUES (p_run_id, p_task_id, p_org_id, p_agent_id, 'queued', p_query, p_context, p_reservation, 1, now());
  INSERT INTO run_event_batches (run_id, first_seq, last_seq, events, created_at)
  VALUES (p_run_id, 1, 1, jsonb_build_array(p_started), now());
  -- The user's query is in the task's history from now on. A run accepted while the previous
  -- one's end was being committed (its update of the task waited for that end) still comes
  -- after that run's messages.
  IF p_user_message_id IS NOT NULL THEN
    INSERT INTO messages (id, task_id, run_id, role, content, created_at)
    VALUES (p_user_message_id, p_task_id, p_run_id, 'user', p_query,
      CASE WHEN p_new_task THEN now()
      ELSE greatest(date_trunc('milliseconds', now()), (SELECT max(m.created_at) + interval '1 millisecond' FROM messages m WHERE m.task_id = p_task_id)) END);
  END IF;

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
  delta integer;
  balance integer;
  events jsonb;
  user_at timestamptz;
  to_store jsonb := p_messages;
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
