import type { Run } from "@agentrun/db";
import { controlChannel, runCancelKey } from "@agentrun/events";
import { finishRun, type FinishRunDeps } from "@agentrun/run-state";

const IN_PROGRESS = new Set(["queued", "running"]);

/**
 * Stops a run. A queued run is ended here at once, unless a worker claimed it meanwhile: then
 * the running path below applies. A running run is flagged in Redis and the workers are told on
 * the control channel; the one executing it aborts its model call or tool and ends the run as
 * `cancelled`. Runs that already ended are left as they are.
 */
export async function cancelRun(deps: FinishRunDeps, run: Pick<Run, "id" | "status" | "query">): Promise<void> {
  if (run.status === "queued") {
    const ended = await finishRun(deps, { runId: run.id, status: "cancelled", messages: [{ role: "user", content: run.query }], onlyIfQueued: true });
    if (ended) return;
  }
  if (IN_PROGRESS.has(run.status)) {
    await deps.redis
      .multi()
      .set(runCancelKey(deps.redisPrefix, run.id), "1", "EX", 3600)
      .publish(controlChannel(deps.redisPrefix), JSON.stringify({ type: "cancel", run_id: run.id }))
      .exec();
  }
}

/**
 * Cancels a run and waits until it has ended, so that its streams get their terminal event.
 * A run whose worker does not react within `waitMs` (worker gone) is ended here as cancelled.
 */
export async function cancelRunAndWait(deps: FinishRunDeps, run: Pick<Run, "id" | "status" | "query">, waitMs = 5000): Promise<void> {
  if (!IN_PROGRESS.has(run.status)) return;
  await cancelRun(deps, run);
  const deadline = Date.now() + waitMs;
  while (Date.now() < deadline) {
    const current = await deps.prisma.run.findUnique({ where: { id: run.id }, select: { status: true } });
    if (!current || !IN_PROGRESS.has(current.status)) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  await finishRun(deps, { runId: run.id, status: "cancelled", messages: [{ role: "user", content: run.query }] });
}
