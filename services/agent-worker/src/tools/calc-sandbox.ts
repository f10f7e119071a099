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
  private thread: Worker | null = null;
  /** Whether `thread` has loaded and takes calculations. */
  private ready = false;
  private readonly queue: Pending[] = [];
  private current: { job: Pending; timer: NodeJS.Timeout } | null = null;
  private nextId = 1;

  constructor(private readonly limits: CalcLimits) {}

  evaluate(expression: string, signal: AbortSignal): Promise<number | boolean | string> {
    return new Promise((resolve, reject) => {
      if (signal.aborted) return reject(new CalcFailure("aborted", "stopped"));
      const job: Pending = { id: this.nextId++, expression, resolve, reject, signal, onAbort: () => this.abort(job) };
      signal.addEventListener("abort", job.onAbort, { once: true });
      this.queue.push(job);
      this.pump();
    });
  }

  private pump(): void {
    if (this.current || this.queue.length === 0) return;
    const thread = this.ensureThread();
    if (!this.ready) return;
    const job = this.queue.shift()!;
    const timer = setTimeout(() => this.fail(job, new CalcFailure("timeout", `took longer than ${this.limits.timeoutMs} ms`)), this.limits.timeoutMs);
    this.current = { job, timer };
    thread.postMessage({ id: job.id, expression: job.expression });
  }

  private ensureThread(): Worker {
    if (this.thread) return this.thread;
    // The thread runs TypeScript through tsx's require hook, like the services themselves.
    const entry = path.join(__dirname, "calc-thread.ts");
    const thread = new Worker(`require("tsx/cjs"); require(${JSON.stringify(entry)});`, {
      eval: true,
      resourceLimits: { maxOldGenerationSizeMb: this.limits.maxHeapMb, maxYoungGenerationSizeMb: Math.min(32, this.limits.maxHeapMb) },
    });
    this.ready = false;
    thread.on("message", (reply: CalcReply) => {
      if ("ready" in reply) {
        if (this.thread !== thread) return;
        this.ready = true;
        return this.pump();
      }
      if (this.current?.job.id !== reply.id) return;
      const { job } = this.current;
      this.settle();
      if ("error" in reply) job.reject(new CalcFailure("invalid", reply.error));
      else job.resolve(reply.result);
    });
    thread.on("error", (err: Error & { code?: string }) => {
      if (this.thread !== thread) return;
      this.thread = null;
      const job = this.current?.job;
      const memory = err.code === "ERR_WORKER_OUT_OF_MEMORY";
      if (job) this.fail(job, new CalcFailure(memory ? "memory" : "invalid", memory ? "needs more memory than a calculation may use" : err.message), false);
      // A thread that cannot even load fails what waits for it rather than leaving it waiting.
      else for (const waiting of [...this.queue]) this.fail(waiting, new CalcFailure("invalid", `the calculator is unavailable: ${err.message}`));
    });
    thread.on("exit", () => {
      if (this.thread !== thread) return;
      this.thread = null;
      const job = this.current?.job;
      if (job) this.fail(job, new CalcFailure("invalid", "the calculation stopped"), false);
    });
    // Unref'd after its listeners (attaching one refs it again): it never keeps the worker alive.
    thread.unref();
    this.thread = thread;
    return thread;
  }

  /** Ends `job` with `err`; when it is the one computing, its thread is stopped. */
  private fail(job: Pending, err: CalcFailure, stopThread = true): void {
    if (this.current?.job === job) {
      this.settle();
      if (stopThread && this.thread) {
        const thread = this.thread;
        this.thread = null;
        void thread.terminate();
      }
    } else {
      const i = this.queue.indexOf(job);
      if (i < 0) return;
      this.queue.splice(i, 1);
      job.signal.removeEventListener("abort", job.onAbort);
    }
    job.reject(err);
    this.pump();
  }

  private abort(job: Pending): void {
    this.fail(job, new CalcFailure("aborted", "stopped"));
  }

  private settle(): void {
    if (!this.current) return;
    clearTimeout(this.current.timer);
    this.current.job.signal.removeEventListener("abort", this.current.job.onAbort);
    this.current = null;
    queueMicrotask(() => this.pump());
  }
}
