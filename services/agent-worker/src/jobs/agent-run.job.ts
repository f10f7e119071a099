import { agentRunJobSchema, DelayedError, type Job } from "@agentrun/queue";
import { failRun } from "@agentrun/run-state";
import { executeRun } from "../runs/execute-run";
import type { RunDeps } from "../runs/run-deps";
import type { ActiveRuns } from "../runs/active-runs";
import { RunHandedBack, RunNotStarted } from "../runs/claim-run";

/** How long a job handed back by a worker that cannot use its database waits before another worker may take it. */
export const HAND_BACK_DELAY_MS = 1000;
/**
 * How many times one job is handed back because its run could not start for an outage
 * (RunNotStarted); after that its errors use up its attempts, as any error does. A longer outage
 * is the worker's database check's to notice, which hands jobs back before they start.
 */
export const MAX_START_DEFERRALS = 10;

/**
 * Processor of `agent-run.execute`: validates the payload and executes the run under a stop
 * signal. A job this worker should not run goes back to the queue without using up one of its
 * attempts, rather than being failed: at once when the worker is closing (`active` takes no new
 * runs; BullMQ hands over a job whose fetch was under way as it closed, which would otherwise
 * start a run the shutdown's grace never stops), after {@link HAND_BACK_DELAY_MS} when it cannot
 * use its database (`databaseUsable`; it stops fetching, see startAgentWorker, but may have
 * fetched one more job as it did). So does a job whose run this worker was still waiting to take
 * over from a stopped worker when it began to close (see claimRun), or whose run its shutdown
 * stopped before the run emitted anything (see executeRun): at once. And so does one whose
 * run could not start for an outage (RunNotStarted), after {@link HAND_BACK_DELAY_MS}, up to
 * {@link MAX_START_DEFERRALS} times.
 */
export function agentRunProcessor(deps: RunDeps, active: ActiveRuns, databaseUsable: () => boolean = () => true) {
  return async (job: Job, token?: string): Promise<void> => {
    const { runId, requestId, deferrals = 0 } = agentRunJobSchema.parse(job.data);
    // A run executing here already (its job handed out again) is joined, as ActiveRuns does.
    if (token && !active.has(runId) && (!active.accepting || !databaseUsable())) {
      await job.moveToDelayed(Date.now() + (active.accepting ? HAND_BACK_DELAY_MS : 0), token);
      throw new DelayedError();
    }
    // The job's age is a cheap first check (no query for the usual job); the run's row decides.
    if (Date.now() - job.timestamp > deps.config.QUEUED_MAX_AGE_MS && (await endIfQueuedTooLong(deps, runId))) return;
    try {
      await active.execute(runId, (control) => executeRun(deps, runId, control, { requestId }));
    } catch (err) {
      if (!token) throw err instanceof RunNotStarted ? err.cause : err;
      if (err instanceof RunHandedBack) {
        await job.moveToDelayed(Date.now(), token);
        throw new DelayedError();
      }
      if (!(err instanceof RunNotStarted)) throw err;
      if (deferrals >= MAX_START_DEFERRALS) throw err.cause;
      try {
        await job.updateData({ runId, requestId, deferrals: deferrals + 1 });
        await job.moveToDelayed(Date.now() + HAND_BACK_DELAY_MS, token);
      } catch {
        // The job could not be handed back (its lock lapsed while Redis was out of reach, its
        // connection waiting for it meanwhile): it fails this attempt, as any error does.
        throw err.cause;
      }
      throw new DelayedError();
    }
  };
}

const QUEUED_TOO_LONG = { code: "unavailable", message: "The run waited in the queue for a worker longer than it may; it was not executed." };

/**
 * Ends a run still queued more than QUEUED_MAX_AGE_MS after it was accepted (no worker was there
 * to take it, or every worker was busy that long) instead of running it, as the sweep ends such
 * a run whose job was lost: its caller has long given up, and running an hours-old request (and
 * charging for it) would surprise everyone. True if it ended the run.
 */
async function endIfQueuedTooLong(deps: RunDeps, runId: string): Promise<boolean> {
  const run = await deps.prisma.run.findUnique({ where: { id: runId }, select: { id: true, status: true, query: true, createdAt: true } });
  if (!run || run.status !== "queued" || Date.now() - run.createdAt.getTime() <= deps.config.QUEUED_MAX_AGE_MS) return false;
  const ended = await failRun(deps, run, QUEUED_TOO_LONG, { onlyIfQueued: true });
  if (ended) deps.logger.warn({ runId, queuedMs: Date.now() - run.createdAt.getTime() }, "ended a run that waited in the queue longer than QUEUED_MAX_AGE_MS");
  return ended;
}
