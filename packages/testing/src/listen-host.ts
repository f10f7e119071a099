import { freePort, startService, waitForOk, type ServiceProcess } from "./processes";

/**
 * Starts `service` (memory or scripted-model) listening on 127.0.0.2 only, through its own host
 * variable, and reports whether it answers `path` there and on 127.0.0.1. Both are loopback
 * addresses of this machine, so a service that listened on every interface would answer both.
 */
export async function reachableAddresses(service: "memory" | "scripted-model", path: string, env: Record<string, string> = {}): Promise<{ own: boolean; other: boolean }> {
  const port = await freePort();
  const vars: Record<string, string> = service === "memory" ? { MEMORY_PORT: String(port), MEMORY_HOST: "127.0.0.2" } : { SCRIPTED_MODEL_PORT: String(port), SCRIPTED_MODEL_HOST: "127.0.0.2" };
  const proc: ServiceProcess = startService(service, { ...env, ...vars, LOG_LEVEL: "warn" });
  try {
    await waitForOk(`http://127.0.0.2:${port}${path}`, proc);
    const answers = (host: string) => fetch(`http://${host}:${port}${path}`, { signal: AbortSignal.timeout(2000) }).then((r) => r.ok, () => false);
    return { own: await answers("127.0.0.2"), other: await answers("127.0.0.1") };
  } finally {
    await proc.stop();
  }
}
