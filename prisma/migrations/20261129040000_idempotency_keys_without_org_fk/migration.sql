-- A request with an Idempotency-Key claims it in a statement of its own, before the run is
-- created, and the foreign key's check of that insert locks the organization's row in KEY SHARE
-- mode: the row that every run of the organization updates for its credit balance. The row then
-- carries a multixact (its updater plus every concurrent key claim), the cost that migration
-- runs_without_org_fk removed from tasks and runs; every widget message sends a key. org_id
-- stays as the key's scope, without the constraint: a key outlives its organization's deletion
-- only until it expires and the sweep deletes it.

-- DropForeignKey
ALTER TABLE "idempotency_keys" DROP CONSTRAINT "idempotency_keys_org_id_fkey";
