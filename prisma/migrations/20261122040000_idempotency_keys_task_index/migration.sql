-- Deleting a task deletes the Idempotency-Keys of its runs: find them without scanning the
-- organization's keys.
CREATE INDEX "idempotency_keys_org_id_task_id_idx" ON "idempotency_keys"("org_id", "task_id");
