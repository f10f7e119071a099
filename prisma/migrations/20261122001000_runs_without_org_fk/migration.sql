-- Every run inserted a task and a run whose org_id referenced its organization, and every such
-- foreign-key check locks the organization's row in KEY SHARE mode; the same row is updated
-- twice per run for the credit balance. With several runs of one organization in flight, the
-- row then carries a multixact (its updater plus every concurrent checker) that each later
-- visibility check had to look up in pg_multixact: with 32 concurrent runs of one tenant this
-- took more PostgreSQL CPU than the runs themselves (5–6.6 ms per run against 1.3 ms for one at
-- a time). tasks.org_id and runs.org_id stay, as copies for filtering, without the constraint;
-- the agent's foreign key still deletes a task (and so its runs) with its agent, and so with its
-- organization. The credit ledger keeps its constraint: its rows are inserted by the
-- transaction that has just updated the organization's row, which takes no extra lock.

-- DropForeignKey
ALTER TABLE "tasks" DROP CONSTRAINT "tasks_org_id_fkey";

-- DropForeignKey
ALTER TABLE "runs" DROP CONSTRAINT "runs_org_id_fkey";
