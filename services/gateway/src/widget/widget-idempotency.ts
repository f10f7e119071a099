import type { PrismaClient } from "@agentrun/db";
import { AppError } from "@agentrun/errors";
import { idempotencyConflict, keyFreedByRunSql } from "../runs/idempotency";

/**
 * Where a widget request's Idempotency-Key is kept: per widget key, and per visitor (`new` for a
 * request without a visitor token, which starts a visitor). A visitor's keys are the visitor's
 * own: another visitor, or a request without a token, never finds them. A new visitor's first
 * request is found by its repeat without a token (the first answer, and the token with it, was
 * lost), and by {@link newVisitorRun} for a repeat that carries the token it started.
 * Kept with the organization's API keys (one table, keyed by organization and key): its parts
 * are joined with spaces, which an Idempotency-Key never holds, so that no API request can
 * name a widget visitor's key (and take its run, or block it).
 */
export function widgetKeyScope(widgetKeyId: string, visitorId: string | null, key: string): string {
  return `widget ${widgetKeyId} ${visitorId ?? "new"} ${key}`;
}

/**
 * The run that a request without a visitor token started with `key`, when it started `visitorId`:
 * the same visitor's repeat, now with the token from the first answer's headers (the stream was
 * lost before its first event). Null when there is none, or when its run never executed for an
 * outage (the queue could not take it: that does not use up the key); 409 `idempotency_conflict`
 * when that request was another (`hash` differs).
 */
export async function newVisitorRun(
  prisma: PrismaClient,
  input: { orgId: string; widgetKeyId: string; visitorId: string; key: string; hash: string },
): Promise<{ runId: string; taskId: string } | null> {
  const [found] = await prisma.$queryRaw<{ run_id: string; task_id: string; request_hash: string }[]>`
    SELECT k.run_id, k.task_id, k.request_hash FROM idempotency_keys k
    JOIN tasks t ON t.id = k.task_id
    JOIN runs r ON r.id = k.run_id
    WHERE k.org_id = ${input.orgId} AND k.key = ${widgetKeyScope(input.widgetKeyId, null, input.key)}
      AND k.expires_at > now() AND t.visitor_id = ${input.visitorId}
      AND NOT ${keyFreedByRunSql}`;
  if (!found) return null;
  if (found.request_hash !== input.hash) throw idempotencyConflict();
  return { runId: found.run_id, taskId: found.task_id };
}

/**
 * How long a new visitor's first request can be repeated without a token: the widget sends a
 * message again for at most 10 minutes (its SENDING_RESUME_MS).
 */
export const NEW_VISITOR_REPEAT_MS = 10 * 60 * 1000;

/**
 * Whether a request without a visitor token that repeats `scopedKey` may have the run (and the
 * visitor, whose token comes with it) that the first request without a token started: only within
 * {@link NEW_VISITOR_REPEAT_MS} of that request, and only while its visitor has that one run (a
 * visitor who went on has its token, so the repeat is not its own). Otherwise anyone holding the
 * key would have the visitor's whole conversation for the key's 24 hours. True while the first
 * request is still being accepted (its task not there yet): the repeat then waits like any other.
 */
export async function newVisitorRepeatAllowed(prisma: PrismaClient, input: { orgId: string; scopedKey: string; taskId: string }): Promise<boolean> {
  const [row] = await prisma.$queryRaw<{ allowed: boolean }[]>`
    SELECT t.id IS NULL OR (k.created_at > now() - make_interval(secs => ${NEW_VISITOR_REPEAT_MS / 1000})
      AND (SELECT sum(v.run_count) FROM tasks v WHERE v.visitor_id = t.visitor_id) = 1) AS allowed
    FROM idempotency_keys k LEFT JOIN tasks t ON t.id = ${input.taskId}
    WHERE k.org_id = ${input.orgId} AND k.key = ${input.scopedKey}`;
  return row?.allowed !== false;
}

/** 409 `idempotency_conflict` for a repeat without a token that {@link newVisitorRepeatAllowed} refuses. */
export const newVisitorKeySpent = () =>
  new AppError("idempotency_conflict", {
    message: "This Idempotency-Key started a visitor's conversation that a request without a visitor token can no longer repeat; send a new key.",
  });
