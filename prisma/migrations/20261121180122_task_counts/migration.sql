-- CreateTable
CREATE TABLE "task_counts" (
    "agent_id" TEXT NOT NULL,
    "status" "TaskStatus" NOT NULL,
    "shard" SMALLINT NOT NULL,
    "n" BIGINT NOT NULL DEFAULT 0,

    CONSTRAINT "task_counts_pkey" PRIMARY KEY ("agent_id","status","shard")
);

-- Keep task_counts in step with tasks: +1 for a task's (agent, status) when it appears, -1 when
-- it leaves (status change, agent change or delete). The shard comes from the task id.
CREATE OR REPLACE FUNCTION agentrun_count_tasks() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'UPDATE' AND NEW.status = OLD.status AND NEW.agent_id = OLD.agent_id THEN
    RETURN NULL;
  END IF;
  IF TG_OP IN ('UPDATE', 'DELETE') THEN
    UPDATE task_counts SET n = n - 1
    WHERE agent_id = OLD.agent_id AND status = OLD.status AND shard = abs(hashtext(OLD.id)) % 16;
  END IF;
  IF TG_OP IN ('UPDATE', 'INSERT') THEN
    INSERT INTO task_counts (agent_id, status, shard, n) VALUES (NEW.agent_id, NEW.status, abs(hashtext(NEW.id)) % 16, 1)
    ON CONFLICT (agent_id, status, shard) DO UPDATE SET n = task_counts.n + 1;
  END IF;
  RETURN NULL;
END;
$$;

CREATE TRIGGER tasks_count AFTER INSERT OR DELETE OR UPDATE OF status, agent_id ON tasks
FOR EACH ROW EXECUTE FUNCTION agentrun_count_tasks();

-- Tasks that exist already.
INSERT INTO task_counts (agent_id, status, shard, n)
SELECT agent_id, status, abs(hashtext(id)) % 16, count(*) FROM tasks GROUP BY 1, 2, 3;
