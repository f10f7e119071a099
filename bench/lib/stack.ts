import fs from "node:fs";
import path from "node:path";
import { createTenant, startStack, testPrisma, type Stack, type Tenant } from "@agentrun/testing";
import type { PrismaClient } from "@agentrun/db";
import { onCleanup, shutdownSignal, trackPid } from "./cleanup";
import { assertLoopback } from "./env";

export interface BenchStackOptions {
  databaseUrl: string;
  redisPrefix: string;
  workers: number;
  workerConcurrency: number;
  memory?: boolean;
  workerEnv?: Record<string, string>;
  gatewayEnv?: Record<string, string>;
  /** Folder for V8 CPU profiles of the gateway and workers (none when undefined). */
  profileDir?: string;
}

export interface BenchStack {
  stack: Stack;
  prisma: PrismaClient;
  /** Stops the services and closes the database client; safe to call twice. */
  stop(): Promise<void>;
  gatewayPid: number;
  workerPids: number[];
  modelPid: number;
  /** Where the gateway's and the workers' CPU profiles are written, when profiling. */
  profileDirs: Record<"gateway" | "worker", string> | null;
  /** The last lines the gateway and workers printed (errors, at the benchmark's log level). */
  logTail(chars?: number): Record<string, string>;
}

/**
 * Starts the real services as processes on free loopback ports (startStack from
 * @agentrun/testing) against a benchmark database and Redis prefix, with quiet logs and
 * benchmark-sized pools. Registered for cleanup on Ctrl-C.
 */
export async function startBenchStack(opts: BenchStackOptions): Promise<BenchStack> {
  // startStack reads these through testEnv().
  process.env.DATABASE_URL = opts.databaseUrl;
  process.env.REDIS_PREFIX = opts.redisPrefix;
  const prof = (role: string): Record<string, string> => {
    if (!opts.profileDir) return {};
    const dir = path.join(opts.profileDir, role);
    fs.mkdirSync(dir, { recursive: true });
    const preload = path.join(__dirname, "cpu-profile-preload.cjs");
    return { NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} --require ${preload}`.trim(), BENCH_CPU_PROF_DIR: dir };
  };
  const level = process.env.BENCH_SERVICE_LOG_LEVEL || "error";
  let stopping: Promise<void> | null = null;
  const prisma = testPrisma(opts.databaseUrl);
  // Ctrl-C or SIGTERM while the stack starts stops what it started (startStack does, then rejects).
  const starting = startStack({
    workers: opts.workers,
    memory: opts.memory ?? true,
    env: { LOG_LEVEL: level, DB_POOL_SIZE: "20", SHUTDOWN_GRACE_MS: "1000", SHUTDOWN_STREAM_GRACE_MS: "500" },
    workerEnv: { WORKER_CONCURRENCY: String(opts.workerConcurrency), ...prof("worker"), ...opts.workerEnv },
    gatewayEnv: { ...prof("gateway"), ...opts.gatewayEnv },
    signal: shutdownSignal,
  });
  const stop = () =>
    (stopping ??= (async () => {
      await (await starting.catch(() => null))?.stop();
      await prisma.$disconnect();
    })());
  const unregister = onCleanup("stack", stop);
  const stack: Stack = await starting;
  assertLoopback(stack.gatewayUrl, "gateway");
  assertLoopback(stack.modelUrl, "scripted model");
  for (const p of [stack.gateway, stack.model, stack.memory, ...stack.workers]) trackPid(p?.child.pid);
  return {
    stack,
    prisma,
    gatewayPid: stack.gateway.child.pid!,
    workerPids: stack.workers.map((w) => w.child.pid!),
    modelPid: stack.model.child.pid!,
    profileDirs: opts.profileDir ? { gateway: path.join(opts.profileDir, "gateway"), worker: path.join(opts.profileDir, "worker") } : null,
    logTail(chars = 4000) {
      const out: Record<string, string> = {};
      for (const p of [stack.gateway, ...stack.workers, stack.model]) {
        const text = p.output().trim();
        if (text) out[`${p.name}#${p.child.pid}`] = text.slice(-chars);
      }
      return out;
    },
    async stop() {
      await stop();
      unregister();
    },
  };
}

/** An organization on the enterprise plan with room for any benchmark: huge rpm and credits. */
export function benchTenant(prisma: PrismaClient): Promise<Tenant> {
  return createTenant(prisma, { plan: "enterprise", rpmLimit: 10_000_000, credits: 100_000_000 });
}
