import { createHash } from "node:crypto";
import type { PrismaClient } from "@agentrun/db";
import { AppError } from "@agentrun/errors";
import type { RunRequest } from "@agentrun/contracts";

/** How long an Idempotency-Key is remembered. */
export const IDEMPOTENCY_TTL_MS = 24 * 3600 * 1000;

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
export function requestHash(agentId: string, body: RunRequest): string {
  const { stream: _stream, ...rest } = body;
  return createHash("sha256").update(`${agentId}\n${canonical(rest)}`).digest("hex");
}

export type Claim = { owner: true } | { owner: false; runId: string; taskId: string };

/**
 * Claims `key` for a new run with the given ids, atomically: the first request inserts the row
 * (or replaces an expired one); a later one with the same request gets the first one's run, and
 * one with a different request gets 409 `idempotency_conflict`.
 */
export async function claimIdempotencyKey(
  prisma: PrismaClient,
  input: { orgId: string; key: string; hash: string; runId: string; taskId: string },
): Promise<Claim> {
  const expires = new Date(Date.now() + IDEMPOTENCY_TTL_MS);
  const rows = await prisma.$queryRaw<{ run_id: string; task_id: string; request_hash: string }[]>`
    INSERT INTO idempotency_keys (org_id, key, request_hash, run_id, task_id, created_at, expires_at)
    VALUES (${input.orgId}, ${input.key}, ${input.hash}, ${input.runId}, ${input.taskId}, now(), ${expires})
    ON CONFLICT (org_id, key) DO UPDATE SET request_hash = EXCLUDED.request_hash, run_id = EXCLUDED.run_id,
      task_id = EXCLUDED.task_id, created_at = now(), expires_at = EXCLUDED.expires_at
    WHERE idempotency_keys.expires_at < now()
    RETURNING run_id, task_id, request_hash`;
  if (rows[0]?.run_id === input.runId) return { owner: true };
  const existing = await prisma.idempotencyKey.findUnique({ where: { orgId_key: { orgId: input.orgId, key: input.key } } });
  if (!existing) return claimIdempotencyKey(prisma, input); // expired and removed in between
  if (existing.requestHash !== input.hash) {
    throw new AppError("idempotency_conflict", { message: "This Idempotency-Key was already used with a different request." });
  }
  return { owner: false, runId: existing.runId, taskId: existing.taskId };
}

/** Frees a key whose run could not be created (refused request), so that a retry can use it. */
export async function releaseIdempotencyKey(prisma: PrismaClient, orgId: string, key: string, runId: string): Promise<void> {
  await prisma.idempotencyKey.deleteMany({ where: { orgId, key, runId } });
}

/** Waits for the run a concurrent request with the same key is creating. */
export async function waitForRun(prisma: PrismaClient, runId: string, timeoutMs = 5000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await prisma.run.findUnique({ where: { id: runId }, select: { id: true } })) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return false;
}
