import type { PrismaClient } from "@agentrun/db";

/** Keys one statement deletes at most, and statements per sweep. */
const BATCH = 1000;
const MAX_BATCHES = 10;

/**
 * Deletes Idempotency-Keys whose day has passed (`expires_at`, by PostgreSQL's clock): a replay
 * finds them expired already (the gateway's claim replaces such a row), so they only take room,
 * one row per keyed request for as long as its task is kept. In batches, skipping rows that a
 * claim (or another worker's sweep) holds at that moment. Returns how many it deleted.
 */
export async function deleteExpiredIdempotencyKeys(prisma: PrismaClient): Promise<number> {
  let deleted = 0;
  for (let i = 0; i < MAX_BATCHES; i++) {
    const n = await prisma.$executeRaw`
      DELETE FROM idempotency_keys WHERE ctid = ANY (ARRAY(
        SELECT ctid FROM idempotency_keys WHERE expires_at < now() LIMIT ${BATCH} FOR UPDATE SKIP LOCKED))`;
    deleted += n;
    if (n < BATCH) break;
  }
  return deleted;
}
