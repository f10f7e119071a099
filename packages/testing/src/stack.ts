import { testEnv } from "./env";
import { freePort, startService, waitForOk, waitForWorker, type ServiceProcess } from "./processes";

/** The internal token (gateway and worker → memory service) of the services tests start. */
export const TEST_INTERNAL_TOKEN = "test-internal-token-0123456789";

export interface StackOptions {
  /** Agent worker processes. @defaultValue 1 */
  workers?: number;
  /** Start the memory service. @defaultValue true */
  memory?: boolean;
  /** Extra environment for every process (e.g. short timeouts). */
  env?: Record<string, string>;
  workerEnv?: Record<string, string>;
  gatewayEnv?: Record<string, string>;
  /** Aborting it during start-up stops every process started so far; startStack then rejects with its reason. */
  signal?: AbortSignal;
}

export interface Stack {
  gatewayUrl: string;
  modelUrl: string;
  memoryUrl: string;
  env: Record<string, string>;
  gateway: ServiceProcess;
  workers: ServiceProcess[];
  memory: ServiceProcess | null;
  model: ServiceProcess;
  /** The worker process whose WORKER_ID is `workerId` (workers are named worker-1, worker-2, …). */
  workerById(workerId: string): ServiceProcess;
  /** Starts one more worker process and waits until it is consuming. */
  addWorker(env?: Record<string, string>): Promise<ServiceProcess>;
  /**
   * Starts another gateway process on the stack's database and Redis prefix, with the stack's
   * common `env` plus `env` (not `gatewayEnv`); it is stopped with the stack.
   */
  addGateway(env?: Record<string, string>): Promise<{ proc: ServiceProcess; url: string }>;
  stop(): Promise<void>;
}

/**
 * Starts the real services as processes on free ports, against this test run's database and
 * Redis prefix: the scripted model, the memory service, the gateway and agent worker(s).
 */
export async function startStack(opts: StackOptions = {}): Promise<Stack> {
  const { databaseUrl, redisUrl, redisPrefix } = testEnv();
  const [gatewayPort, modelPort, memoryPort] = await Promise.all([freePort(), freePort(), freePort()]);
  const modelUrl = `http://127.0.0.1:${modelPort}`;
  const memoryUrl = `http://127.0.0.1:${memoryPort}`;
  const env: Record<string, string> = {
    DATABASE_URL: databaseUrl,
    REDIS_URL: redisUrl,
    // Each stack gets its own queue and channels, so test files never take each other's jobs.
    REDIS_PREFIX: `${redisPrefix}:${gatewayPort}`,
    INTERNAL_TOKEN: TEST_INTERNAL_TOKEN,
    MEMORY_URL: memoryUrl,
    SCRIPTED_MODEL_URL: `${modelUrl}/v1`,
    MODEL_MAX_RETRIES: "0",
    ...opts.env,
  };
  // Their own port variables win over PORT, so an exported MEMORY_PORT or SCRIPTED_MODEL_PORT cannot move them.
  const model = startService("scripted-model", { ...env, SCRIPTED_MODEL_PORT: String(modelPort), SCRIPTED_MODEL_HOST: "127.0.0.1" });
  const memory = opts.memory === false ? null : startService("memory", { ...env, MEMORY_PORT: String(memoryPort), MEMORY_HOST: "127.0.0.1" });
  const gateway = startService("gateway", { ...env, PORT: String(gatewayPort), ...opts.gatewayEnv });
  const gatewayUrl = `http://127.0.0.1:${gatewayPort}`;
  const workers: ServiceProcess[] = [];
  const extraGateways: ServiceProcess[] = [];

  const addWorker = async (extra: Record<string, string> = {}) => {
    const workerId = `worker-${workers.length + 1}`;
    const w = startService("agent-worker", { WORKER_ID: workerId, ...env, ...opts.workerEnv, ...extra });
    workers.push(w);
    await waitForWorker(env.REDIS_URL!, env.REDIS_PREFIX!, workerId, w);
    return w;
  };

  const stack: Stack = {
    gatewayUrl,
    modelUrl,
    memoryUrl,
    env,
    gateway,
    workers,
    memory,
    model,
    addWorker,
    async addGateway(extra = {}) {
      const port = await freePort();
      const proc = startService("gateway", { ...env, ...extra, PORT: String(port) });
      extraGateways.push(proc);
      const url = `http://127.0.0.1:${port}`;
      await waitForOk(`${url}/healthz`, proc);
      return { proc, url };
    },
    workerById(workerId) {
      const i = Number(/^worker-(\d+)$/.exec(workerId)?.[1]);
      const w = workers[i - 1];
      if (!w) throw new Error(`no worker ${workerId}`);
      return w;
    },
    async stop() {
      await Promise.all([...workers.map((w) => w.stop()), ...extraGateways.map((g) => g.stop()), gateway.stop(), model.stop(), memory?.stop()]);
    },
  };
  const { signal } = opts;
  const startup = (async () => {
    await Promise.all([waitForOk(`${modelUrl}/v1/models`, model), memory ? waitForOk(`${memoryUrl}/healthz`, memory) : null, waitForOk(`${gatewayUrl}/healthz`, gateway)]);
    for (let i = 0; i < (opts.workers ?? 1); i++) {
      signal?.throwIfAborted();
      await addWorker();
    }
  })();
  const interrupted = signal ? abortedBy(signal) : null;
  try {
    await (interrupted ? Promise.race([startup, interrupted.promise]) : startup);
  } catch (err) {
    // A start-up cut short goes on until its next step, which then fails: nothing more starts.
    startup.catch(() => {});
    await stack.stop();
    throw err;
  } finally {
    interrupted?.dispose();
  }
  return stack;
}

/** A promise that rejects with `signal`'s reason once it aborts, and how to stop listening. */
function abortedBy(signal: AbortSignal): { promise: Promise<never>; dispose(): void } {
  let onAbort = () => {};
  const promise = new Promise<never>((_, reject) => {
    onAbort = () => reject(signal.reason);
    if (signal.aborted) onAbort();
    else signal.addEventListener("abort", onAbort, { once: true });
  });
  promise.catch(() => {});
  return { promise, dispose: () => signal.removeEventListener("abort", onAbort) };
}
