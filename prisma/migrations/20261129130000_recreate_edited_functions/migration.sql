-- Three functions as the migrations that define them now do. Those migrations
-- (20261128000000_memory_search_nfc, 20261128020000_finish_run_lost_claim) were amended after
-- they were first published, and Prisma never applies a recorded migration again: a database
-- migrated in between lacks agentrun_nfc (memory search then fails on every query) or
-- agentrun_reclaim_run (a worker whose claim PostgreSQL lost cannot take its run back). Where the
-- functions are current already, this changes nothing. Published migrations are not edited any
-- more: packages/db checks them against prisma/migration-checksums.txt.

CREATE OR REPLACE FUNCTION agentrun_nfc(t text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
BEGIN
  IF current_setting('server_encoding') = 'UTF8' THEN
    RETURN normalize(t, NFC);
  END IF;
  RETURN t;
END;
$$;

CREATE OR REPLACE FUNCTION agentrun_memory_search_doc() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  NEW.search_doc := to_tsvector('english', agentrun_nfc(NEW.content));
  RETURN NEW;
END;
$$;

CREATE OR REPLACE FUNCTION agentrun_reclaim_run(p_run_id text, p_worker_id text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  t text;
BEGIN
  UPDATE runs SET status = 'running', started_at = coalesce(started_at, now()), worker_id = p_worker_id
  WHERE id = p_run_id AND status = 'queued' AND worker_id IS NULL
  RETURNING task_id INTO t;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  UPDATE tasks SET status = 'running', updated_at = now() WHERE id = t AND active_run_id = p_run_id;
  RETURN true;
END;
$$;
