import type { Run } from "@agentrun/db";
import { controlChannel, RUN_CANCEL_FLAG_TTL_S, runCancelKey, runHeartbeatKey, runWriterKey } from "@agentrun/events";
import { finishRun, type FinishRunDeps } from "@agentrun/run-state";

const IN_PROGRESS = new Set(["queued", "running"]);

/**
 * Stops a run. A queued run is ended here at once, unless a worker claimed it meanwhile: then
 * the running path below applies. A running run is marked in PostgreSQL, flagged in Redis, and
 * the workers are told on the control channel; the one executing it aborts its model call or tool
 * and ends the run as `cancelled` (as it does a run it completes after the mark). Runs that
 * already ended are left as they are.
 */
export async function cancelRun(deps: FinishRunDeps, run: Pick<Run, "id" | "status" | "query">): Promise<void> {
  // A queued run whose log a worker holds is that worker's (PostgreSQL lost its claim, which
  // the worker takes back with its next batch): ended here, its end would be numbered after
  // run_started, over events the worker has streamed. (Redis out of reach: as before.)
  if (run.status === "queued" && !(await deps.redis.exists(runWriterKey(deps.redisPrefix, run.id)).catch(() => 0))) {
    const ended = await finishRun(deps, { runId: run.id, status: "cancelled", messages: [{ role: "user", content: run.query }], onlyIfQueued: true });
    if (ended) return;
  }
  if (IN_PROGRESS.has(run.status)) {
    // Recorded on the run first: a worker that hears of the cancel only once the run completed
    // ends it cancelled all the same (agentrun_finish_run reads the mark under the run's lock),
    // so that a cancel answered with the run in progress always stops it.
    await deps.prisma.$executeRaw`UPDATE runs SET cancel_requested_at = now() WHERE id = ${run.id} AND status IN ('queued', 'running') AND cancel_requested_at IS NULL`;
    await deps.redis
      .multi()
      .set(runCancelKey(deps.redisPrefix, run.id), "1", "EX", RUN_CANCEL_FLAG_TTL_S)
      .publish(controlChannel(deps.redisPrefix), JSON.stringify({ type: "cancel", run_id: run.id }))
      .exec();
  }
}

/**
 * Longest {@link cancelRunAndWait} waits for a run whose worker is alive (it keeps the run's
 * heartbeat) but has not ended it: a worker that missed the cancel message finds the cancel flag
 * with its next heartbeat, a third of its LOCK_DURATION_MS later.
 */
export const LIVE_WORKER_WAIT_MS = 60_000;

/**
 * Cancels a run and waits until it has ended, so that its streams get their terminal event.
 * A run not ended within `waitMs` is ended here as cancelled (at no cost) once no worker keeps
 * its heartbeat (the worker is gone), or after {@link LIVE_WORKER_WAIT_MS} at the latest, with what
 * its events show it said and did: a live worker that reacts late ends the run itself, charging what it used.
 */
export async function cancelRunAndWait(deps: FinishRunDeps, run: Pick<Run, "id" | "status" | "query">, waitMs = 5000): Promise<void> {
  if (!IN_PROGRESS.has(run.status)) return;
  await cancelRun(deps, run);
  const started = Date.now();
  const heartbeat = runHeartbeatKey(deps.redisPrefix, run.id);
  for (;;) {
    const current = await deps.prisma.run.findUnique({ where: { id: run.id }, select: { status: true } });
    if (!current || !IN_PROGRESS.has(current.status)) return;
    const waited = Date.now() - started;
    if (waited >= waitMs && (waited >= LIVE_WORKER_WAIT_MS || (await deps.redis.exists(heartbeat)) === 0)) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  // Its worker's record of the run is out of reach: the run's events give its messages and tool calls.
  await finishRun(deps, { runId: run.id, status: "cancelled", messages: [{ role: "user", content: run.query }], fromEvents: true });
}
