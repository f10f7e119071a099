-- The user's message of a run on an existing task is stamped with the run's own time as the
-- runs table stores it: now() rounded to the millisecond, as a timestamptz(3) column rounds it
-- (date_trunc truncated it, so the message was often 1 ms older than its run), or 1 ms after the
-- task's last message when that is later. The rest of agentrun_create_run is unchanged.
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
      ELSE greatest(now()::timestamptz(3), (SELECT max(m.created_at) + interval '1 millisecond' FROM messages m WHERE m.task_id = p_task_id)) END);
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
