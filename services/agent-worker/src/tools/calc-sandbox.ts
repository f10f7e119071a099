import path from "node:path";
import { Worker } from "node:worker_threads";
import type { CalcReply } from "./calc-thread";

export interface CalcLimits {
  /** Longest one expression may compute. */
  timeoutMs: number;
  /** Heap of the calc thread (V8's old generation). */
  maxHeapMb: number;
}

/** Why an evaluation has no value: the expression's own error, or a limit it hit. */
export class CalcFailure extends Error {
  override name = "CalcFailure";
  constructor(
    readonly reason: "invalid" | "timeout" | "memory" | "aborted",
    message: string,
  ) {
    super(message);
  }
}

interface Pending {
  id: number;
  expression: string;
  resolve: (value: number | boolean | string) => void;
  reject: (err: CalcFailure) => void;
  signal: AbortSignal;
  onAbort: () => void;
}

/**
 * Evaluates calc expressions on one thread of their own, one at a time, in order. An expression
 * that computes past `timeoutMs` or outgrows the thread's heap ends the thread (the next
 * expression starts a new one) and fails alone; the worker's event loop, its heap and the other
 * runs never wait for it. A run that is cancelled stops its expression the same way.
 */
export class CalcSandbox {
  /** The thread, and whether it has loaded and takes calculations. */
  private thread: { worker: Worker; ready: boolean } | null = null;
  private readonly queue: Pending[] = [];
  private current: { job: Pending; timer: NodeJS.Timeout } | null = null;
  private nextId = 1;

  constructor(private readonly limits: CalcLimits) {}

  evaluate(expression: string, signal: AbortSignal): Promise<number | boolean | string> {
    return new Promise((resolve, reject) => {
      if (signal.aborted) return reject(new CalcFailure("aborted", "stopped"));
      const job: Pending = { id: this.nextId++, expression, resolve, reject, signal, onAbort: () => this.fail(job, new CalcFailure("aborted", "stopped")) };
      signal.addEventListener("abort", job.onAbort, { once: true });
      this.queue.push(job);
      this.pump();
    });
  }

  /** Hands the next waiting calculation to the thread, once it is free and loaded. */
  private pump(): void {
    if (this.current || this.queue.length === 0) return;
    const thread = this.thread ?? this.start();
    if (!thread.ready) return;
    const job = this.queue.shift()!;
    const timer = setTimeout(() => this.fail(job, new CalcFailure("timeout", `took longer than ${this.limits.timeoutMs} ms`)), this.limits.timeoutMs);
    this.current = { job, timer };
    thread.worker.postMessage({ id: job.id, expression: job.expression });
  }

  private start(): { worker: Worker; ready: boolean } {
    // The thread runs TypeScript through tsx's require hook, like the services themselves.
    const entry = path.join(__dirname, "calc-thread.ts");
    const worker = new Worker(`require("tsx/cjs"); require(${JSON.stringify(entry)});`, {
      eval: true,
      resourceLimits: { maxOldGenerationSizeMb: this.limits.maxHeapMb, maxYoungGenerationSizeMb: Math.min(32, this.limits.maxHeapMb) },
    });
    const thread = { worker, ready: false };
    worker.on("message", (reply: CalcReply) => {
      if ("ready" in reply) {
        thread.ready = true;
        return this.pump();
      }
      if (this.current?.job.id !== reply.id) return;
      const { job } = this.current;
      this.finish(job);
      if ("error" in reply) job.reject(new CalcFailure("invalid", reply.error));
      else job.resolve(reply.result);
      this.pump();
    });
    worker.on("error", (err: Error & { code?: string }) => {
      const memory = err.code === "ERR_WORKER_OUT_OF_MEMORY";
      this.lost(thread, new CalcFailure(memory ? "memory" : "invalid", memory ? "needs more memory than a calculation may use" : err.message));
    });
    worker.on("exit", () => this.lost(thread, new CalcFailure("invalid", "the calculation stopped")));
    // Unref'd after its listeners (attaching one refs it again): it never keeps the worker alive.
    worker.unref();
    this.thread = thread;
    return thread;
  }

  /**
   * The thread ended by itself (out of memory, crashed): the calculation on it fails with
   * `failure`. One that could not even load fails every waiting calculation instead of being
   * started again for each.
   */
  private lost(thread: { worker: Worker; ready: boolean }, failure: CalcFailure): void {
    if (this.thread !== thread) return;
    this.thread = null;
    const job = this.current?.job;
    if (job) {
      this.finish(job);
      job.reject(failure);
      return this.pump();
    }
    for (const waiting of this.queue.splice(0)) {
      waiting.signal.removeEventListener("abort", waiting.onAbort);
      waiting.reject(new CalcFailure("invalid", `the calculator is unavailable: ${failure.message}`));
    }
  }

  /** Ends `job` with `err` (a limit it hit, or its run stopped); the thread computing it is stopped. */
  private fail(job: Pending, err: CalcFailure): void {
    if (this.current?.job === job) {
      this.finish(job);
      const thread = this.thread;
      this.thread = null;
      void thread?.worker.terminate();
    } else {
      const i = this.queue.indexOf(job);
      if (i < 0) return;
      this.queue.splice(i, 1);
      job.signal.removeEventListener("abort", job.onAbort);
    }
    job.reject(err);
    this.pump();
  }

  /** `job`, the current calculation, has its answer or its failure: the thread is free. */
  private finish(job: Pending): void {
    clearTimeout(this.current!.timer);
    job.signal.removeEventListener("abort", job.onAbort);
    this.current = null;
  }
}
