import { spawn, type ChildProcess } from "node:child_process";
import net from "node:net";
import path from "node:path";
import { REPO_ROOT } from "@agentrun/db";
import { Redis } from "ioredis";

/** A free TCP port on 127.0.0.1. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

export interface ServiceProcess {
  name: string;
  child: ChildProcess;
  /** Everything the process printed, for failure messages. */
  output(): string;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves when it exited. */
  stop(graceMs?: number): Promise<void>;
  /** SIGKILL at once: the process dies mid-work. */
  kill(): Promise<void>;
}

/** A line of a service's JSON log, as parsed. */
export type LogLine = Record<string, any>;

/** The JSON log lines `proc` printed so far (other output, such as a stack trace, left out). */
export function logLinesOf(proc: ServiceProcess): LogLine[] {
  return proc.output().split("\n").flatMap((line) => {
    try {
      const parsed: unknown = JSON.parse(line);
      return parsed && typeof parsed === "object" ? [parsed as LogLine] : [];
    } catch {
      return [];
    }
  });
}

/**
 * Starts `services/<service>/src/index.ts` as its own process. tsx is loaded into that process
 * (`--import tsx`) rather than run as a wrapper, so signals, including SIGKILL, reach the service.
 */
export function startService(service: string, env: Record<string, string>): ServiceProcess {
  const child = spawn(process.execPath, ["--import", "tsx", path.join(REPO_ROOT, "services", service, "src/index.ts")], {
    cwd: REPO_ROOT,
    env: { ...process.env, LOG_LEVEL: process.env.TEST_SERVICE_LOG_LEVEL || "warn", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  const keep = (d: Buffer) => {
    out += d.toString();
    if (out.length > 200_000) out = out.slice(-100_000);
  };
  child.stdout!.on("data", keep);
  child.stderr!.on("data", keep);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const alive = () => endedHow(child) === null;
  return {
    name: service,
    child,
    output: () => out,
    async stop(graceMs = 10_000) {
      if (!alive()) return;
      child.kill("SIGTERM");
      const t = setTimeout(() => child.kill("SIGKILL"), graceMs);
      await exited;
      clearTimeout(t);
    },
    async kill() {
      if (!alive()) return;
      child.kill("SIGKILL");
      await exited;
    },
  };
}

/**
 * How `child` ended (its exit code, or the signal that killed it, as one stopped before it set its
 * SIGTERM handler is), or null while it runs.
 */
function endedHow({ exitCode, signalCode }: ChildProcess): string | null {
  return exitCode !== null ? String(exitCode) : signalCode;
}

/** Polls `url` until it answers 200, or fails with the process output. */
export async function waitForOk(url: string, proc: ServiceProcess | null, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = "";
  while (Date.now() < deadline) {
    if (proc && endedHow(proc.child)) throw new Error(`${proc.name} exited (${endedHow(proc.child)}):\n${proc.output()}`);
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(1000) });
      if (res.ok) return;
      last = `${res.status} ${await res.text()}`;
    } catch (err) {
      last = (err as Error).message;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url} not ready after ${timeoutMs} ms (${last})${proc ? `:\n${proc.output()}` : ""}`);
}

/** Waits until the worker named `workerId` has sent its first heartbeat (it is consuming jobs). */
export async function waitForWorker(redisUrl: string, redisPrefix: string, workerId: string, proc: ServiceProcess, timeoutMs = 30_000): Promise<void> {
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
  try {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (endedHow(proc.child)) throw new Error(`${proc.name} exited (${endedHow(proc.child)}):\n${proc.output()}`);
      if (await redis.zscore(`${redisPrefix}:workers`, workerId)) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`worker ${workerId} sent no heartbeat within ${timeoutMs} ms:\n${proc.output()}`);
  } finally {
    redis.disconnect();
  }
}
