import { testEnv } from "./env";
import { freePort, startService, waitForOk, type ServiceProcess } from "./processes";
import { TEST_INTERNAL_TOKEN } from "./stack";

/** A memory service process of a test's own, on the test database. */
export interface MemoryService {
  url: string;
  /** The internal token it takes (`Authorization: Bearer …`). */
  token: string;
  process: ServiceProcess;
  /** Suspends the process (SIGSTOP): it accepts connections and answers nothing. */
  freeze(): void;
  /** Resumes a frozen process (SIGCONT). */
  thaw(): void;
  stop(): Promise<void>;
}

/**
 * Starts the real memory service on a free loopback port and waits until it answers. `env` adds
 * to (or overrides) its environment, e.g. `{ LOG_LEVEL: "info" }` to read its request lines.
 */
export async function startMemoryService(env: Record<string, string> = {}): Promise<MemoryService> {
  const port = await freePort();
  const proc = startService("memory", { DATABASE_URL: testEnv().databaseUrl, INTERNAL_TOKEN: TEST_INTERNAL_TOKEN, MEMORY_PORT: String(port), MEMORY_HOST: "127.0.0.1", ...env });
  const url = `http://127.0.0.1:${port}`;
  await waitForOk(`${url}/healthz`, proc);
  return {
    url,
    token: TEST_INTERNAL_TOKEN,
    process: proc,
    freeze: () => process.kill(proc.child.pid!, "SIGSTOP"),
    thaw: () => process.kill(proc.child.pid!, "SIGCONT"),
    stop: () => proc.stop(),
  };
}
