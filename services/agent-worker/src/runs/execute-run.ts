import type { ChatCompletionMessageParam } from "openai/resources/chat/completions";
import { runContextSchema, type CutFinishReason, type RunContext, type RunEvent } from "@agentrun/contracts";
import { giveBackRunWriter, RUN_LOG_TTL_LIVE_S, RunEventWriter, runCancelKey, runHeartbeatKey, runWriterKey } from "@agentrun/events";
import { storableText } from "@agentrun/db";
import { isUnavailableError } from "@agentrun/errors";
import type { Logger } from "@agentrun/logger";
import { finishRun, type FinishRunUsage, type MessageRecord } from "@agentrun/run-state";
import { claimRun, RunHandedBack, RunNotStarted, type ClaimedRun } from "./claim-run";
import { renewalIntervalMs } from "./heartbeat-renewal";
import { callModelRetryingBreaks } from "./model-call-retry";
import { buildMessages, recentHistory, toolCallMessage } from "./prompt";
import { loadMemories } from "./run-memories";
import type { RunControl } from "./active-runs";
import { logRunEnd } from "./run-end-log";
import { TextPacer } from "./text-pacer";
import { RunFailure, stopReasonOf } from "./run-failure";
import type { RunDeps } from "./run-deps";
import type { ToolCallOutcome } from "../tools/registry";
import { StoppedBeforeStart } from "../tools/tool";

/** How long a finished run's result is held while PostgreSQL is unreachable before giving up. */
const FINISH_RETRY_MS = 120_000;

const STOP_CODES: Record<string, { status: "cancelled" | "failed"; code?: string; message?: string }> = {
  cancel: { status: "cancelled" },
  shutdown: { status: "failed", code: "worker_shutdown", message: "The worker shut down before the run finished." },
  deadline: { status: "failed", code: "run_timeout", message: "The run took longer than its time limit." },
  // Never stored: the run is someone else's to end (finishRun returns null for a superseded writer).
  superseded: { status: "failed", code: "worker_lost", message: "The run was taken over." },
};

/** What the job says about a run besides its id. */
export interface RunJobContext {
  /** The gateway request that started the run: bound with the run's id on its log lines. */
  requestId?: string;
}

/**
 * Executes one run from claim to terminal event. Every outcome, including model errors,
 * cancellation and shutdown, ends in one `finishRun`, logged in one info line ("run ended");
 * only a failure to record the end (database down past the retries) is thrown, so that BullMQ
 * retries the job.
 */
export async function executeRun(deps: RunDeps, runId: string, control: RunControl, job: RunJobContext = {}): Promise<void> {
  const { prisma, redis, redisPrefix } = deps;
  const { signal } = control;
  const started = performance.now();
  const log = deps.logger.child(job.requestId ? { runId, requestId: job.requestId } : { runId });
  // The cancel flag is read alongside the claim: a cancel sent after this read reaches the run
  // through `signal` (the run is registered with the control channel's listener before this),
  // and the heartbeat reads the flag again, for a control message this worker did not get.
  // A flag that cannot be read (Redis down as the run starts) does not fail the run: the
  // heartbeat reads it again, and a cancel sent later comes through the control channel.
  const cancelKey = runCancelKey(redisPrefix, runId);
  const cancelFlag = redis.exists(cancelKey).catch((err: unknown) => {
    log.warn({ err }, "could not read the run's cancel flag; the heartbeat reads it again");
    return 0;
  });
  const claim = await claimRun(deps, runId, control.closing, log).catch((err: unknown) => {
    throw isUnavailableError(err) ? new RunNotStarted(runId, err) : err;
  });
  if (!claim) return;
  const store = { prisma, redis, redisPrefix };
  const hbKey = runHeartbeatKey(redisPrefix, runId);
  const beat = () => {
    void redis.set(hbKey, deps.workerId, "PX", deps.heartbeatTtlMs).catch(() => {});
    void redis.exists(cancelKey).then((flagged) => flagged && control.stop("cancel"), () => {});
  };
  const heartbeat = setInterval(beat, renewalIntervalMs(deps.heartbeatTtlMs));
  const stopReconnectBeats = deps.reconnectBeats.add(runId, beat);
  // However many model calls and tools it goes through, a run ends within its time limit,
  // counted from its first claim: a run restarted by another worker does not start it again.
  const deadline = setTimeout(() => control.stop("deadline"), Math.max(0, deps.config.RUN_TIMEOUT_MS - claim.elapsedMs));
  const writer = new RunEventWriter({
    redis,
    prisma,
    redisPrefix,
    runId,
    lastSeq: claim.lastSeq,
    // The heartbeat goes with the terminal event's write (one round trip less per run), and so
    // does a cancel flag, which would otherwise outlive the run by a day.
    deleteAtEnd: [hbKey, cancelKey],
    writerId: deps.workerId,
    onError: (err) => log.warn({ err }, "event store write failed"),
    onSuperseded: () => {
      log.warn("the run was ended or taken over elsewhere; stopping it here");
      control.stop("superseded");
    },
  });
  const progress: RunProgress = { records: [], usage: { promptTokens: 0, completionTokens: 0, toolCalls: 0, chargedToolCalls: 0, modelCalls: 0 }, output: "", pricing: undefined };
  const { records } = progress;
  // Set when this worker's end was not stored because the run was ended or taken over elsewhere.
  let endedElsewhere = false;

  try {
    const end = await answer(deps, log, claim, cancelFlag, writer, signal, progress).then(
      (): RunEnd => ({ status: "completed" }),
      async (err): Promise<RunEnd> => {
        // PostgreSQL or Redis out of reach before the run said anything (reading its agent, say):
        // BullMQ tries the job again, and its claim restarts the run (its heartbeat is gone).
        if (!(err instanceof RunFailure) && !signal.aborted && writer.lastSeq === claim.lastSeq && isUnavailableError(err)) {
          log.warn({ err }, "the run could not start: infrastructure out of reach; it will be tried again");
          // Its log too, which it has not written: should PostgreSQL have lost the claim, the
          // next attempt's claim is a fresh one (on any worker), which takes a free log only.
          await giveBackRunWriter(redis, runWriterKey(redisPrefix, runId), deps.workerId, null, RUN_LOG_TTL_LIVE_S).catch(() => {});
          throw new RunNotStarted(runId, err);
        }
        // Stopped by this worker's shutdown before it said anything (still waiting for the model's
        // first token, say): its job goes back to the queue and another worker restarts it, as
        // after a crash, rather than failing it. Its heartbeat goes first, so that the taker
        // need not wait for it to lapse; a Redis out of reach fails it as worker_shutdown.
        if (stopReasonOf(signal) === "shutdown" && writer.lastSeq === claim.lastSeq && (await redis.del(hbKey).then(() => true, () => false))) {
          log.info("stopped by the worker's shutdown before it emitted anything; handed back for another worker to restart");
          throw new RunHandedBack(runId);
        }
        return endOf(err, signal, log);
      },
    );
    // A failed run has no output: half an answer must not pass for one. What it streamed stays in its events.
    const output = end.status === "failed" ? "" : progress.output;
    if (output || end.status === "completed") records.push({ role: "assistant", content: output });
    const finish = { runId, output, usage: progress.usage, pricing: progress.pricing, finishReason: end.status === "completed" ? progress.finishReason : undefined, writer, retryForMs: FINISH_RETRY_MS };
    let terminal: RunEvent | null;
    try {
      terminal = await finishRun(store, { ...finish, ...end, messages: records });
      endedElsewhere = terminal === null;
    } catch (err) {
      // PostgreSQL still down after the retries: BullMQ retries the job, and its claim ends the
      // run with the events this worker could not store.
      if (isUnavailableError(err)) throw err;
      // PostgreSQL refused what the run produced: the run still ends, as failed, with its events
      // and the user's query.
      log.error({ err }, "the run's end could not be stored; ending it as failed");
      terminal = await finishRun(store, { ...finish, output: "", status: "failed", error: UNSTORABLE, messages: records.slice(0, 1) });
    }
    // A run ended elsewhere (taken over, ended by a sweeper) is logged by whoever ended it.
    if (terminal) logRunEnd(log, terminal, { taskId: claim.run.taskId, durationMs: claim.elapsedMs + (performance.now() - started), usage: progress.usage });
  } finally {
    clearInterval(heartbeat);
    stopReconnectBeats();
    clearTimeout(deadline);
    // The heartbeat of a run ended or taken over elsewhere may be its new owner's now.
    if (!writer.ended && !writer.superseded && !endedElsewhere) await redis.del(hbKey).catch(() => {});
  }
}

/** What a run has produced and consumed so far: the messages to store, its usage, its text. */
interface RunProgress {
  records: MessageRecord[];
  usage: FinishRunUsage;
  /** The text of the latest model call: the run's output once it ends. */
  output: string;
  pricing: unknown;
  /** Set when the model ended the run's answer early (see ModelTurn.cutShort). */
  finishReason?: CutFinishReason;
}

/**
 * Runs the agent on a claimed run until the model answers without tool calls, emitting its
 * events and recording its progress; throws when it is stopped or fails.
 */
async function answer(deps: RunDeps, log: Logger, claim: ClaimedRun, cancelFlag: Promise<number>, writer: RunEventWriter, signal: AbortSignal, progress: RunProgress): Promise<void> {
  const { config } = deps;
  const { run } = claim;
  const { records, usage } = progress;
  records.push({ role: "user", content: run.query });
  const context: RunContext | undefined = runContextSchema.safeParse(run.context ?? undefined).data;
  const userId = context?.user_id ?? run.taskUserId ?? undefined;
  // Everything the first model call needs, fetched concurrently.
  const history = recentHistory(claim.history, config.HISTORY_MAX_CHARS);
  const [agent, cancelled, memories] = await Promise.all([
    deps.agents.get(run.agentId),
    cancelFlag,
    loadMemories(deps, log, { runId: run.id, orgId: run.orgId, agentId: run.agentId, userId, query: run.query }, signal),
  ]);
  progress.pricing = agent.pricing;
  if (cancelled) throw new RunFailure("cancel", "cancelled before start");
  const promptContext = await templateContext(deps, agent.instructions, context, { id: run.taskId, userId });
  const messages: ChatCompletionMessageParam[] = buildMessages({ instructions: agent.instructions, context: promptContext, memories, history, query: run.query });
  const target = deps.models.forAgent(agent);
  deps.tools.prepare(agent.tools);
  const toolDefs = deps.tools.definitions(agent.tools);
  const toolCtx = { orgId: run.orgId, agentId: agent.id, userId, httpAllowlist: agent.httpAllowlist, memory: deps.memory, runId: run.id, signal };

  const recordToolCall = (callId: string, outcome: ToolCallOutcome) => {
    usage.toolCalls++;
    if (outcome.charged) usage.chargedToolCalls++;
    writer.emit({ type: "tool_result", tool: outcome.tool, action: outcome.action, result: outcome.result, call_id: callId });
    const content = JSON.stringify(outcome.result);
    messages.push({ role: "tool", tool_call_id: callId, content });
    records.push({ role: "tool", content, tool: outcome.tool, action: outcome.action, params: outcome.params, result: outcome.result, toolCallId: callId });
  };

  // One for the whole run: its text events are counted across model calls.
  const text = new TextPacer((content) => writer.emit({ type: "text_chunk", content }));
  for (let step = 0; ; step++) {
    if (signal.aborted) throw new RunFailure(stopReasonOf(signal) ?? "cancel", "stopped");
    usage.modelCalls++;
    // The run's output is its final text: what the last model call says.
    progress.output = "";
    const turn = await callModelRetryingBreaks({
      client: target.client,
      model: target.model,
      messages,
      tools: toolDefs,
      temperature: agent.temperature,
      signal,
      timeoutMs: config.MODEL_TIMEOUT_MS,
      idleTimeoutMs: config.MODEL_IDLE_TIMEOUT_MS,
      maxRetries: config.MODEL_MAX_RETRIES,
      onText: (content) => {
        progress.output += content;
        text.push(content);
      },
      onUsage: (used) => {
        usage.promptTokens += used.promptTokens;
        usage.completionTokens += used.completionTokens;
      },
    }).finally(() => text.flush());
    // An answer cut short while asking for tools holds a last call cut too: none is run, and the
    // run ends with what was said, as an answer cut short does.
    if (turn.toolCalls.length === 0 || turn.cutShort) {
      progress.finishReason = turn.cutShort;
      return;
    }
    // No model call is left to read what these tools would return: end here, without their effects.
    if (step + 1 >= agent.maxSteps) throw new RunFailure("max_steps_exceeded", `The agent did not answer within ${agent.maxSteps} model calls.`);
    // What the model said before calling tools is a message of its own, before theirs.
    if (turn.text) records.push({ role: "assistant", content: turn.text });
    // Stored as that message: it is not the run's output, which only a later answer gives.
    progress.output = "";

    messages.push(toolCallMessage(turn));
    for (const call of turn.toolCalls) {
      if (signal.aborted) throw new RunFailure(stopReasonOf(signal) ?? "cancel", "stopped");
      let started: Omit<ToolCallOutcome, "result" | "ok" | "charged"> | undefined;
      let outcome: ToolCallOutcome;
      try {
        outcome = await deps.tools.call(call.name, call.arguments, agent.tools, toolCtx, (announced) => {
          started = announced;
          writer.emit({ type: "tool_call", ...announced, call_id: call.id });
        });
      } catch (err) {
        // Stopped while the tool ran: the call it announced is recorded, with what stopped it, then
        // the run stops. One that still waited for a calc thread or a lookup slot never ran.
        if (!signal.aborted || !started) throw err;
        const unstarted = err instanceof StoppedBeforeStart;
        outcome = { ...started, result: { error: unstarted ? UNSTARTED_TOOL : STOPPED_TOOL }, ok: false, charged: !unstarted };
        recordToolCall(call.id, outcome);
        throw err;
      }
      recordToolCall(call.id, outcome);
    }
  }
}

/** The result of a tool call the run was stopped during (cancelled, or its worker shutting down); the tool ran, so it is charged. */
const STOPPED_TOOL = { code: "stopped", message: "The run was stopped while this tool ran; its result was not awaited." } as const;
/** The result of a tool call the run was stopped before it began (waiting for a free calc thread or lookup): not charged. */
const UNSTARTED_TOOL = { code: "stopped", message: "The run was stopped before this tool started; it did not run." } as const;

type RunEnd = { status: "completed" | "cancelled" | "failed"; error?: { code: string; message: string } };

const UNSTORABLE = { code: "internal_error", message: "The run's result could not be stored." };

/** How a run that threw ends: stopped (cancel, shutdown) or failed with the failure's code. */
function endOf(err: unknown, signal: AbortSignal, log: RunDeps["logger"]): RunEnd {
  const stop = err instanceof RunFailure ? STOP_CODES[err.code] : signal.aborted ? STOP_CODES[stopReasonOf(signal) ?? "cancel"] : undefined;
  if (stop) {
    log.info({ reason: stop.status }, "run stopped");
    return { status: stop.status, error: stop.code ? { code: stop.code, message: stop.message ?? "" } : undefined };
  }
  const failure = err instanceof RunFailure ? err : new RunFailure("internal_error", "The run failed unexpectedly.", { cause: err });
  // What the provider said is an operator's concern: in this log, never in the run's error.
  const level = failure.code === "internal_error" ? "error" : failure.detail === undefined ? "info" : "warn";
  log[level]({ err, code: failure.code, detail: failure.detail }, "run failed");
  // Stored with the run as a last line of defence: no U+0000 or lone surrogate in it.
  return { status: "failed", error: { code: failure.code, message: storableText(failure.message) } };
}

/**
 * What the instructions template is filled from: the run context, with the task's `user_id` and
 * `metadata` (given when the task was created) where the run context has none. The task's
 * metadata is read only for instructions that use it.
 */
async function templateContext(deps: RunDeps, instructions: string, context: RunContext | undefined, task: { id: string; userId: string | undefined }): Promise<RunContext> {
  const taskMetadata = /\{\{\s*metadata\./.test(instructions)
    ? ((await deps.prisma.task.findUnique({ where: { id: task.id }, select: { metadata: true } }))?.metadata as Record<string, unknown> | null)
    : null;
  return { ...context, user_id: task.userId, metadata: { ...taskMetadata, ...context?.metadata } };
}
