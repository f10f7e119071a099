import { AppError, sqlStateOf } from "@agentrun/errors";
import { newId, type Prisma, type PrismaClient } from "@agentrun/db";

type Db = PrismaClient | Prisma.TransactionClient;

/** Balances are 32-bit integers. */
const MAX_BALANCE = 2_147_483_647;
type Reason = "grant" | "run_reservation" | "run_charge" | "run_refund";

/** Adds `delta` to the balance and records it; returns the new balance, or null if no such org. */
async function applyDelta(db: Db, orgId: string, delta: number, reason: Reason, runId: string | null): Promise<number | null> {
  const rows = await db.$queryRaw<{ credit_balance: number }[]>`
    UPDATE organizations SET credit_balance = credit_balance + ${delta}, updated_at = now()
    WHERE id = ${orgId} RETURNING credit_balance`;
  const balance = rows[0]?.credit_balance;
  if (balance === undefined) return null;
  await db.creditLedgerEntry.create({ data: { id: newId("led"), orgId, runId, amount: delta, reason, balanceAfter: balance } });
  return balance;
}

/**
 * Adds credits to an organization within the caller's transaction, so that the grant is stored
 * together with the caller's other writes or not at all (the initial grant of a new
 * organization). Every failure is thrown, and a refused grant leaves `tx` unusable in
 * PostgreSQL: let the error end the transaction.
 */
export async function grantCreditsInTransaction(tx: Prisma.TransactionClient, orgId: string, amount: number): Promise<{ balance: number }> {
  if (!Number.isInteger(amount) || amount <= 0) throw new AppError("invalid_request", { message: "amount must be a positive integer" });
  const balance = await applyDelta(tx, orgId, amount, "grant", null).catch((err) => {
    if (sqlStateOf(err) === "22003") throw new AppError("invalid_request", { message: `the balance would exceed ${MAX_BALANCE} credits` });
    throw err;
  });
  if (balance === null) throw new AppError("not_found", { message: `no organization ${orgId}` });
  return { balance };
}

/** Adds credits to an organization in a transaction of its own (admin CLI `credits add`). */
export async function grantCredits(prisma: PrismaClient, orgId: string, amount: number): Promise<{ balance: number }> {
  return prisma.$transaction((tx) => grantCreditsInTransaction(tx, orgId, amount));
}

export async function getBalance(prisma: Db, orgId: string): Promise<number | null> {
  const org = await prisma.organization.findUnique({ where: { id: orgId }, select: { creditBalance: true } });
  return org?.creditBalance ?? null;
}
