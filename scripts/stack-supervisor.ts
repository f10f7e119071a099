/**
 * The processes of a whole stack on one machine, for `npm run dev` and `npm start`.
 *
 * Each service runs in a session of its own, so that Ctrl-C (which signals the terminal's whole
 * foreground group) reaches only this process, and an IPC channel stops it should this process
 * die without stopping it (see `onStopRequest`). The stack stops in order, as docker-compose's
 * dependencies stop it: the gateway and the workers first (a worker lets its runs finish within
 * SHUTDOWN_GRACE_MS), then the services they call, the memory service and the scripted model,
 * which would otherwise refuse the model calls and memory lookups of the runs still finishing.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import path from "node:path";
import { envInteger, MAX_TIMER_MS } from "@agentrun/config";
import { REPO_ROOT } from "@agentrun/db";

export type Service = "gateway" | "agent-worker" | "memory" | "scripted-model";

/** `WORKERS`: how many agent workers to start. */
export const workersSetting = envInteger(1, 16).default(1);

/** Stopped first: they call the others. */
const CALLERS: readonly Service[] = ["gateway", "agent-worker"];

/**
 * How long the gateway and the workers may take to stop before they are killed: 10 s past the
 * worker's own deadline (SHUTDOWN_GRACE_MS, 10 s by default, and 5 s to store its runs' ends),
 * 20 s at least. The worker takes a SHUTDOWN_GRACE_MS that leaves room for these 10 s in a timer;
 * one it refuses (it then exits at start-up, and the stack with it) gets no deadline that a timer
 * would turn into an immediate SIGKILL either.
 */
export function callerStopGraceMs(env: NodeJS.ProcessEnv): number {
  return Math.min(MAX_TIMER_MS, Math.max(20_000, (Number(env.SHUTDOWN_GRACE_MS) || 10_000) + 10_000));
}

/** The memory service and the scripted model cut what is still open after 10 and 15 s. */
const CALLEE_STOP_GRACE_MS = 20_000;

interface Started {
  service: Service;
  child: ChildProcess;
}

/** How often the supervisor checks that the process that started it (npm) is still there. */
const PARENT_CHECK_MS = 500;

const running = (c: ChildProcess) => c.exitCode === null && c.signalCode === null;

export class StackSupervisor {
  private readonly started: Started[] = [];
  private stopping: Promise<never> | null = null;

  constructor(private readonly opts: { env: NodeJS.ProcessEnv; callerGraceMs: number }) {}

  /** Starts `service` with the supervisor's environment and `env` over it. */
  start(service: Service, env: Record<string, string> = {}): void {
    if (this.stopping) return;
    const child = spawn(process.execPath, ["--import", "tsx", path.join(REPO_ROOT, "services", service, "src/index.ts")], {
      env: { ...this.opts.env, ...env },
      stdio: ["ignore", "inherit", "inherit", "ipc"],
      detached: true,
    });
    child.on("exit", (code, signal) => {
      if (!this.stopping) void this.stop(1, `${service} exited (${signal ?? code}); stopping.`);
    });
    this.started.push({ service, child });
  }

  /**
   * Starts `count` workers. A worker's id tells the owner of a run apart from a worker taking it
   * over: with a WORKER_ID set and more than one worker, each gets its own (`-1`, `-2`, …).
   */
  startWorkers(count: number, env: Record<string, string> = {}): void {
    const base = this.opts.env.WORKER_ID;
    for (let i = 0; i < count; i++) this.start("agent-worker", { ...env, ...(base && count > 1 ? { WORKER_ID: `${base}-${i + 1}` } : {}) });
  }

  /** Whether a stop has begun (a service exited by itself, say), and its end. */
  get stopped(): Promise<never> | null {
    return this.stopping;
  }

  /**
   * Stops the stack on SIGINT, SIGTERM and SIGHUP (its terminal closed: the services, in sessions
   * of their own, do not get that one). A repeated signal changes nothing: a terminal and npm may
   * each send one for a single Ctrl-C, and every service is killed by its deadline anyway.
   */
  stopOnSignals(): void {
    for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.on(signal, () => void this.stop(0));
    // npm hands only SIGINT and SIGTERM on to its script: a SIGHUP (or SIGKILL) to npm ends npm
    // alone, and this process is handed to init. Its parent gone, it stops the stack as on a signal.
    const parent = process.ppid;
    setInterval(() => {
      if (process.ppid !== parent) void this.stop(0);
    }, PARENT_CHECK_MS).unref();
  }

  /**
   * Prints `line` if given, stops the gateway and the workers, then the other services (each
   * group SIGTERM, then SIGKILL at its deadline), and exits with `code` once all have exited.
   */
  stop(code: number, line?: string): Promise<never> {
    if (line) process.stderr.write(`${line}\n`);
    return (this.stopping ??= (async () => {
      await this.stopGroup(this.started.filter((s) => CALLERS.includes(s.service)), this.opts.callerGraceMs);
      await this.stopGroup(this.started.filter((s) => !CALLERS.includes(s.service)), CALLEE_STOP_GRACE_MS);
      process.exit(code);
    })());
  }

  private async stopGroup(group: Started[], graceMs: number): Promise<void> {
    const live = group.filter((s) => running(s.child));
    const exited = Promise.all(live.map((s) => once(s.child, "exit")));
    for (const { child } of live) child.kill("SIGTERM");
    const kill = setTimeout(() => {
      for (const { service, child } of live.filter((s) => running(s.child))) {
        process.stderr.write(`${service} did not stop within ${graceMs} ms of SIGTERM; killing it.\n`);
        child.kill("SIGKILL");
      }
    }, graceMs);
    await exited;
    clearTimeout(kill);
  }
}
