import type { ChildProcess } from "node:child_process";
import { CALC_MAX_RESULT_CHARS } from "./calc-limits";
import type { CalcReply } from "./calc-thread";
import { spawnCalcProcess } from "./calc-process";

export interface CalcLimits {
  /** Longest one expression may compute, counted from when a thread takes it. */
  timeoutMs: number;
  /** Longest an expression may wait for a free thread; one still waiting then fails unevaluated. */
  maxWaitMs: number;
  /** Heap of each calc process (V8's old generation). */
  maxHeapMb: number;
  /** Calc threads computing at once. */
  threads: number;
}

/** Why an evaluation has no value: the expression's own error, or a limit it hit. */
export class CalcFailure extends Error {
  override name = "CalcFailure";
  constructor(
    /**
     * `unavailable`: no thread could load, so the expression was never evaluated. `aborted`: its
     * run stopped while a thread computed it; `unstarted`: while it waited for one.
     */
    readonly reason: "invalid" | "oversized" | "timeout" | "memory" | "busy" | "aborted" | "unstarted" | "unavailable",
    message: string,
  ) {
    super(message);
  }
}

interface Job {
  id: number;
  expression: string;
  resolve: (value: number | boolean | string) => void;
  reject: (err: CalcFailure) => void;
  signal: AbortSignal;
  onAbort: () => void;
  /** Fails the job as busy unless a thread takes it within `maxWaitMs` of its asking. */
  waitTimer: NodeJS.Timeout;
  askedAt: number;
}

/** Longest a calculation waits for the thread that is loading to take it (see `waitedTooLong`). */
const MAX_LOAD_WAIT_MS = 30_000;

/** What a process that ran out of heap says before V8 aborts it. */
const OUT_OF_MEMORY = /heap out of memory|Reached heap limit|Allocation failed/;
/** The tail of a process's stderr kept to tell why it ended. */
const STDERR_TAIL_CHARS = 2000;

interface Thread {
  worker: ChildProcess;
  /** Loaded: it takes calculations. */
  ready: boolean;
  /** What it computes, and the timer that stops it at `timeoutMs`. */
  current: { job: Job; timer: NodeJS.Timeout } | null;
  /** Settles once the thread is loaded, or has ended without loading. */
  loaded: Promise<void>;
  settleLoaded: () => void;
}

/**
 * Evaluates calc expressions on up to `threads` processes of their own (called threads here: one
 * calculation each at a time), in the order asked. An expression that computes past `timeoutMs`
 * or outgrows its process's heap ends that process (a new one starts when needed) and fails
 * alone; one that no thread takes within `maxWaitMs` fails without being evaluated, so a burst of
 * slow expressions delays another run's calculation by at most that long, plus the loading of the
 * thread it is next in line for (see `waitedTooLong`). The worker's event loop and heap never
 * wait for a calculation. A run that is cancelled stops its expression the same way.
 *
 * Processes, not worker threads: V8 aborts the whole process when one allocation passes a heap
 * limit (`zeros(10000000)` is 80 MB at once), and a worker thread's limit would take the agent
 * worker down with every run on it.
 *
 * The processes start with an empty environment: an expression that escaped mathjs would not
 * find the worker's keys and tokens there.
 */
export class CalcSandbox {
  private readonly threads: Thread[] = [];
  private readonly queue: Job[] = [];
  private nextId = 1;

  constructor(private readonly limits: CalcLimits) {}

  evaluate(expression: string, signal: AbortSignal): Promise<number | boolean | string> {
    return new Promise((resolve, reject) => {
      if (signal.aborted) return reject(new CalcFailure("unstarted", "stopped"));
      const job: Job = {
        id: this.nextId++,
        expression,
        resolve,
        reject,
        signal,
        onAbort: () => this.fail(job, new CalcFailure(this.queue.includes(job) ? "unstarted" : "aborted", "stopped")),
        waitTimer: setTimeout(() => this.waitedTooLong(job), this.limits.maxWaitMs),
        askedAt: Date.now(),
      };
      signal.addEventListener("abort", job.onAbort, { once: true });
      this.queue.push(job);
      this.pump();
    });
  }

  /**
   * Starts the threads not started yet and resolves once every thread has loaded (or ended), so
   * that the next calculations wait for no thread's loading.
   */
  async warm(): Promise<void> {
    while (this.threads.length < this.limits.threads) this.start();
    await Promise.all(this.threads.map((t) => t.loaded));
  }

  /** Hands waiting calculations to free loaded threads, and starts threads for those left. */
  private pump(): void {
    for (const thread of this.threads) {
      if (this.queue.length === 0) return;
      if (thread.ready && !thread.current) this.run(thread, this.queue.shift()!);
    }
    // Each thread still loading takes one of the waiting calculations once loaded.
    const loading = this.threads.filter((t) => !t.ready).length;
    for (let n = Math.min(this.queue.length - loading, this.limits.threads - this.threads.length); n > 0; n--) this.start();
  }

  private run(thread: Thread, job: Job): void {
    clearTimeout(job.waitTimer);
    const timer = setTimeout(() => this.fail(job, new CalcFailure("timeout", `took longer than ${this.limits.timeoutMs} ms`)), this.limits.timeoutMs);
    thread.current = { job, timer };
    thread.worker.send({ id: job.id, expression: job.expression });
  }

  private start(): void {
    // Its own limit on an evaluation, well past ours: only for when this process is gone.
    const worker = spawnCalcProcess({ maxHeapMb: this.limits.maxHeapMb, evaluationLimitMs: 2 * this.limits.timeoutMs + 1000 });
    let settleLoaded = () => {};
    const loaded = new Promise<void>((resolve) => (settleLoaded = resolve));
    const thread: Thread = { worker, ready: false, current: null, loaded, settleLoaded };
    let stderr = "";
    worker.stderr?.on("data", (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-STDERR_TAIL_CHARS)));
    worker.on("message", (reply: CalcReply) => {
      if ("ready" in reply) {
        thread.ready = true;
        thread.settleLoaded();
        return this.pump();
      }
      const job = thread.current?.job;
      if (job?.id !== reply.id) return;
      this.finish(thread);
      if ("error" in reply) job.reject(new CalcFailure("invalid", reply.error));
      else if ("oversized" in reply) job.reject(new CalcFailure("oversized", `its answer has ${reply.oversized} characters; at most ${CALC_MAX_RESULT_CHARS} are returned`));
      else job.resolve(reply.result);
      this.pump();
    });
    // A process that could not start, or whose channel closed: the service's failure, not the expression's.
    worker.on("error", (err) => this.lost(thread, new CalcFailure("unavailable", `the calculator stopped: ${err.message}`)));
    // `close`, not `exit`: its stderr has been read to the end by then. A process ended by
    // anything but its heap limit (stopped with the service, killed by the system) ended no fault
    // of the expression's either.
    worker.on("close", (code, signal) => {
      const memory = signal === "SIGABRT" || OUT_OF_MEMORY.test(stderr);
      const failure = memory
        ? new CalcFailure("memory", "needs more memory than a calculation may use")
        : new CalcFailure("unavailable", `the calculator stopped (${signal ?? `exit code ${code}`}); try again`);
      this.lost(thread, failure);
    });
    // Unref'd after its listeners: it never keeps the worker alive.
    worker.unref();
    worker.channel?.unref();
    (worker.stderr as unknown as { unref?: () => void } | null)?.unref?.();
    this.threads.push(thread);
  }

  /**
   * The thread ended by itself (out of memory, crashed): the calculation on it fails with
   * `failure`. One that could not even load fails every waiting calculation instead of being
   * started again for each.
   */
  private lost(thread: Thread, failure: CalcFailure): void {
    thread.settleLoaded();
    const i = this.threads.indexOf(thread);
    if (i < 0) return;
    this.threads.splice(i, 1);
    const job = thread.current?.job;
    if (job) {
      this.finish(thread);
      job.reject(failure);
      return this.pump();
    }
    if (thread.ready) return this.pump();
    for (const waiting of this.queue.splice(0)) {
      this.release(waiting);
      waiting.reject(new CalcFailure("unavailable", `the calculator is unavailable: ${failure.message}`));
    }
  }

  /**
   * `job` has waited `maxWaitMs`: refused as busy, unless a thread still loading is to take it (it
   * waits for that loading, not behind other calculations, and a loaded machine can take seconds
   * to load a thread). Such a wait is bounded by MAX_LOAD_WAIT_MS.
   */
  private waitedTooLong(job: Job): void {
    const place = this.queue.indexOf(job);
    const loading = this.threads.filter((t) => !t.ready).length;
    const waited = Date.now() - job.askedAt;
    if (place >= 0 && place < loading && waited < MAX_LOAD_WAIT_MS) {
      job.waitTimer = setTimeout(() => this.waitedTooLong(job), Math.min(this.limits.maxWaitMs, MAX_LOAD_WAIT_MS - waited));
      return;
    }
    this.fail(job, new CalcFailure("busy", `the calculator is busy (no thread was free within ${this.limits.maxWaitMs} ms); try again later`));
  }

  /** Ends `job` with `err` (a limit it hit, or its run stopped); a thread computing it is stopped. */
  private fail(job: Job, err: CalcFailure): void {
    const thread = this.threads.find((t) => t.current?.job === job);
    if (thread) {
      this.finish(thread);
      this.threads.splice(this.threads.indexOf(thread), 1);
      thread.worker.kill("SIGKILL");
    } else {
      const i = this.queue.indexOf(job);
      if (i < 0) return;
      this.queue.splice(i, 1);
      this.release(job);
    }
    job.reject(err);
    this.pump();
  }

  /** `thread`'s calculation has its answer or its failure: the thread is free. */
  private finish(thread: Thread): void {
    clearTimeout(thread.current!.timer);
    this.release(thread.current!.job);
    thread.current = null;
  }

  /** `job` is settled: nothing of it may fire any more. */
  private release(job: Job): void {
    clearTimeout(job.waitTimer);
    job.signal.removeEventListener("abort", job.onAbort);
  }
}
