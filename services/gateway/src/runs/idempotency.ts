import { createHash } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import type { Request } from "express";
import { Prisma, type PrismaClient } from "@agentrun/db";
import { AppError, fieldRefused, isUnavailableError, mayHaveBeenCarriedOut } from "@agentrun/errors";
import { withRetry } from "@agentrun/run-state";
import { idempotencyKeySchema, type RunRequest, type WidgetRunRequest } from "@agentrun/contracts";

/** The error code of a run the queue could not take (see start-run.ts). */
export const UNQUEUED_CODE = "unavailable";

/**
 * Whether a run frees the Idempotency-Key that names it: it never executed for an outage (the
 * queue could not take it, or its job was lost until it was too old to start), so the key's next
 * request starts a run of its own. {@link keyFreedByRunSql} says the same in SQL.
 */
export const freesItsKey = (run: { status: string; error?: { code: string } | null }) => run.status === "failed" && run.error?.code === UNQUEUED_CODE;

/** {@link freesItsKey} of the run aliased `r`, as an SQL condition. */
export const keyFreedByRunSql = Prisma.sql`(r.status = 'failed' AND r.error_code = ${UNQUEUED_CODE})`;

/** How long an Idempotency-Key is remembered. */
export const IDEMPOTENCY_TTL_MS = 24 * 3600 * 1000;

/** The request's Idempotency-Key; undefined when it sent none, 400 `invalid_request` when it is malformed. */
export function idempotencyKeyOf(req: Request): string | undefined {
  const header = req.get("idempotency-key");
  if (header === undefined) return undefined;
  const key = idempotencyKeySchema.safeParse(header);
  if (!key.success) throw fieldRefused("Idempotency-Key", "Idempotency-Key must be 1-255 printable ASCII characters without spaces.");
  return key.data;
}

/** JSON with object keys sorted, so that equal bodies hash equally whatever their key order. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value && typeof value === "object") {
    return `{${Object.keys(value)
      .sort()
      .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`)
      .join(",")}}`;
  }
  return JSON.stringify(value);
}

/**
 * What identifies a request for idempotency: the agent and the body, except `stream` — a client
 * may retry a streamed request as JSON (or the other way round) and still get the same run.
 */
export function requestHash(agentId: string, body: RunRequest | WidgetRunRequest): string {
  const { stream: _stream, ...rest } = body;
  return createHash("sha256").update(`${agentId}\n${canonical(rest)}`).digest("hex");
}

/** 409 `idempotency_conflict`: the key was used with another request. */
export const idempotencyConflict = () => new AppError("idempotency_conflict", { message: "This Idempotency-Key was already used with a different request." });

export type Claim = { owner: true } | { owner: false; runId: string; taskId: string };

/**
 * How long a claimed key may name a run that does not exist before the claim counts as abandoned:
 * the request that claimed it stopped between its claim and its run (its gateway was killed, or
 * PostgreSQL failed it and the key's release too). Past anything that request can still do: its
 * statements time out within seconds, and a run whose creation went unanswered is looked for
 * and ended for a minute (`ABANDON_RETRY_MS`).
 */
export const ABANDONED_CLAIM_MS = 120_000;

/**
 * Claims `key` for a new run with the given ids, atomically: the first request inserts the row
 * (or replaces one that has expired, whose claim was abandoned, or that names a run the queue
 * could not take, which does not use up its key); a later one with the same request gets the
 * first one's run, and one with a different request gets 409 `idempotency_conflict`.
 */
export async function claimIdempotencyKey(
  prisma: PrismaClient,
  input: { orgId: string; key: string; hash: string; runId: string; taskId: string },
): Promise<Claim> {
  // Expiry by PostgreSQL's clock, which also decides when it has passed (not the gateway's).
  const rows = await prisma.$queryRaw<{ run_id: string; task_id: string; request_hash: string }[]>`
    INSERT INTO idempotency_keys (org_id, key, request_hash, run_id, task_id, created_at, expires_at)
    VALUES (${input.orgId}, ${input.key}, ${input.hash}, ${input.runId}, ${input.taskId}, now(), now() + make_interval(secs => ${IDEMPOTENCY_TTL_MS / 1000}))
    ON CONFLICT (org_id, key) DO UPDATE SET request_hash = EXCLUDED.request_hash, run_id = EXCLUDED.run_id,
      task_id = EXCLUDED.task_id, created_at = now(), expires_at = EXCLUDED.expires_at
    WHERE idempotency_keys.expires_at < now()
      OR (idempotency_keys.created_at < now() - make_interval(secs => ${ABANDONED_CLAIM_MS / 1000})
        AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = idempotency_keys.run_id))
      OR EXISTS (SELECT 1 FROM runs r WHERE r.id = idempotency_keys.run_id AND ${keyFreedByRunSql})
    RETURNING run_id, task_id, request_hash`;
  if (rows[0]?.run_id === input.runId) return { owner: true };
  const existing = await prisma.idempotencyKey.findUnique({ where: { orgId_key: { orgId: input.orgId, key: input.key } } });
  if (!existing) return claimIdempotencyKey(prisma, input); // expired and removed in between
  if (existing.requestHash !== input.hash) throw idempotencyConflict();
  return { owner: false, runId: existing.runId, taskId: existing.taskId };
}

/**
 * Frees a key whose run could not be created (refused request), so that a retry can use it. A
 * release PostgreSQL cannot take now (the pool exhausted, the server refusing connections: often
 * the very reason the run could not be created) rejects, and goes on in the background until
 * the claim would count as abandoned anyway ({@link ABANDONED_CLAIM_MS}); meanwhile a retry with
 * the key waits for a run that will never exist, and gets 409 `run_in_progress`.
 */
export async function releaseIdempotencyKey(prisma: PrismaClient, orgId: string, key: string, runId: string): Promise<void> {
  const release = () => deleteClaim(prisma, orgId, key, runId);
  try {
    await release();
  } catch (err) {
    if (isUnavailableError(err)) releaseInBackground(() => withRetry(ABANDONED_CLAIM_MS, release));
    throw err;
  }
}

/** Deletes the key's claim if it still names `runId` (this request's own run, never another's). */
const deleteClaim = (prisma: PrismaClient, orgId: string, key: string, runId: string) => prisma.idempotencyKey.deleteMany({ where: { orgId, key, runId } });

const MAX_BACKGROUND_RELEASES = 100;
let backgroundReleases = 0;

/**
 * Runs `release` in the background, at most MAX_BACKGROUND_RELEASES at once: under a long
 * overload they would add to it. A key left out is taken over by its next request after
 * ABANDONED_CLAIM_MS.
 */
function releaseInBackground(release: () => Promise<unknown>): void {
  if (backgroundReleases >= MAX_BACKGROUND_RELEASES) return;
  backgroundReleases++;
  void release()
    .catch(() => {})
    .finally(() => backgroundReleases--);
}

/** How long, and how often, a claim whose answer was lost is released again. */
const LOST_CLAIM_RELEASE_MS = 30_000;
const LOST_CLAIM_RELEASE_EVERY_MS = 1000;

/**
 * Releases a claim whose answer was lost, at once and then every second for 30 s: a statement
 * that timed out on the client may still be running on the server (waiting for a row lock or a
 * slow commit) and commit its claim after a first release found nothing to delete. Only the
 * claim naming this request's own (never created) run is deleted.
 */
function releaseLostClaim(prisma: PrismaClient, orgId: string, key: string, runId: string): void {
  releaseInBackground(async () => {
    for (const until = Date.now() + LOST_CLAIM_RELEASE_MS; Date.now() < until; ) {
      await deleteClaim(prisma, orgId, key, runId).catch(() => {});
      await sleep(LOST_CLAIM_RELEASE_EVERY_MS, undefined, { ref: false });
    }
  });
}

/**
 * Claims `key` for a new run (see {@link claimIdempotencyKey}). When an earlier request holds it,
 * waits until that request's run exists and answers with it. A key freed meanwhile (that request
 * was refused, or the run's task was deleted with its keys) is claimed again, as often as that
 * happens within `timeoutMs` (a burst of identical requests to a refused run: each gets the
 * refusal in turn). 409 `run_in_progress` when no run appears within `timeoutMs`: that request is
 * still being accepted. A claim whose answer was lost (it may have been carried out) is released
 * (see releaseLostClaim), so that the retry its 503 invites does not find the key held for a run
 * that will never exist.
 */
export async function claimKeyForRun(
  prisma: PrismaClient,
  input: { orgId: string; key: string; hash: string; runId: string; taskId: string },
  timeoutMs = 5000,
): Promise<Claim> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    let claim: Claim;
    try {
      claim = await claimIdempotencyKey(prisma, input);
    } catch (err) {
      if (mayHaveBeenCarriedOut(err)) releaseLostClaim(prisma, input.orgId, input.key, input.runId);
      throw err;
    }
    if (claim.owner) return claim;
    const state = await waitForRun(prisma, { orgId: input.orgId, key: input.key, runId: claim.runId }, Math.max(0, deadline - Date.now()));
    if (state === "ready") return claim;
    if (state === "pending" || Date.now() >= deadline) {
      throw new AppError("run_in_progress", { message: "A request with this Idempotency-Key is still being accepted; retry shortly." });
    }
  }
}

/**
 * Waits for the run a concurrent request with the same key is creating: "ready" once it exists,
 * "released" as soon as the key no longer names it (no such run will come), "pending" past
 * `timeoutMs`. Both are read in one statement, so a run created and its key kept is never taken
 * for a released key.
 */
async function waitForRun(prisma: PrismaClient, claim: { orgId: string; key: string; runId: string }, timeoutMs: number): Promise<"ready" | "released" | "pending"> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const [row] = await prisma.$queryRaw<{ run: boolean; claimed: boolean }[]>`
      SELECT EXISTS (SELECT 1 FROM runs WHERE id = ${claim.runId}) AS run,
        EXISTS (SELECT 1 FROM idempotency_keys WHERE org_id = ${claim.orgId} AND key = ${claim.key} AND run_id = ${claim.runId}) AS claimed`;
    if (row?.run) return "ready";
    if (!row?.claimed) return "released";
    await new Promise((r) => setTimeout(r, 50));
  }
  return "pending";
}
