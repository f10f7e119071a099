-- AlterTable
ALTER TABLE "credit_ledger" ADD COLUMN "seq" BIGSERIAL NOT NULL;

-- CreateIndex
CREATE UNIQUE INDEX "credit_ledger_seq_key" ON "credit_ledger"("seq");
