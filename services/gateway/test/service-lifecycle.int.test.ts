import { spawnSync } from "node:child_process";
import { once } from "node:events";
import net from "node:net";
import path from "node:path";
import { REPO_ROOT } from "@agentrun/db";
import { createTenant, eventually, freePort, startMemoryService, startService, testEnv, testPrisma, waitForOk, watchSse } from "@agentrun/testing";

/** Runs a service's entry point with `env` and returns how it exited. */
function boot(service: string, env: Record<string, string>) {
  const r = spawnSync(process.execPath, ["--import", "tsx", path.join(REPO_ROOT, "services", service, "src/index.ts")], {
    cwd: REPO_ROOT,
    env: { ...process.env, ...env },
    encoding: "utf8",
    timeout: 30_000,
  });
  return { status: r.status, stderr: r.stderr.trim(), stdout: r.stdout.trim() };
}

describe("start-up configuration", () => {
  it.each([
    ["gateway", { PORT: "not-a-port" }, "PORT"],
    ["gateway", { REDIS_URL: "http://wrong" }, "REDIS_URL"],
    ["agent-worker", { WORKER_CONCURRENCY: "0" }, "WORKER_CONCURRENCY"],
    ["agent-worker", { DATABASE_URL: "mysql://x" }, "DATABASE_URL"],
    ["memory", { INTERNAL_TOKEN: "short" }, "INTERNAL_TOKEN"],
    ["scripted-model", { LOG_LEVEL: "loud" }, "LOG_LEVEL"],
  ])("%s exits with one line naming a bad %s", (service, env, variable) => {
    const r = boot(service, env as Record<string, string>);
    expect(r.status).toBe(1);
    expect(r.stderr.split("\n")).toHaveLength(1);
    expect(r.stderr).toContain(variable);
    expect(r.stderr).toMatch(/^invalid environment: /);
  });

  it("names every bad variable at once", () => {
    const r = boot("gateway", { PORT: "x", RUN_WAIT_TIMEOUT_MS: "-5" });
    expect(r.stderr).toContain("PORT");
    expect(r.stderr).toContain("RUN_WAIT_TIMEOUT_MS");
  });
});

describe("ports", () => {
  /** Holds a port on every interface, as another program would, until `release` is called. */
  async function occupiedPort(): Promise<{ port: number; release: () => Promise<void> }> {
    const server = net.createServer();
    server.listen(await freePort());
    await once(server, "listening");
    return { port: (server.address() as net.AddressInfo).port, release: () => new Promise((r) => server.close(() => r())) };
  }

  // A service's own variable must win over PORT: those cases set PORT to a free port, where a
  // service reading the wrong variable would start instead of failing (the boot would time out).
  it.each<[string, string, Record<string, string>]>([
    ["gateway", "PORT", {}],
    ["memory", "MEMORY_PORT", {}],
    ["memory", "PORT", { MEMORY_PORT: "" }],
    ["scripted-model", "SCRIPTED_MODEL_PORT", {}],
    ["scripted-model", "PORT", { SCRIPTED_MODEL_PORT: "" }],
  ])("%s exits with one line when the port of %s is in use", async (service, variable, extra) => {
    const busy = await occupiedPort();
    try {
      const other: Record<string, string> = variable === "PORT" ? {} : { PORT: String(await freePort()) };
      const r = boot(service, { ...other, ...extra, [variable]: String(busy.port) });
      expect(r.status).toBe(1);
      expect(r.stderr.split("\n")).toHaveLength(1);
      expect(r.stderr).toMatch(new RegExp(`^start-up failed: listen EADDRINUSE: address already in use \\S*:${busy.port}$`));
    } finally {
      await busy.release();
    }
  });
});

describe("gateway lifecycle", () => {
  it("logs one JSON line per request with its request id, and exits 0 on SIGTERM", async () => {
    const port = await freePort();
    const { databaseUrl, redisUrl, redisPrefix } = testEnv();
    const gw = startService("gateway", { PORT: String(port), DATABASE_URL: databaseUrl, REDIS_URL: redisUrl, REDIS_PREFIX: `${redisPrefix}:life`, LOG_LEVEL: "info" });
    await waitForOk(`http://127.0.0.1:${port}/healthz`, gw);
    const prisma = testPrisma(databaseUrl);
    const tenant = await createTenant(prisma);
    const res = await fetch(`http://127.0.0.1:${port}/api/tasks/none?limit=1`, { headers: { ...tenant.headers, "x-request-id": "trace-123" } });
    expect(res.headers.get("x-request-id")).toBe("trace-123");
    // A request a route of the API answers, under both of its prefixes.
    for (const prefix of ["/api", "/api/v1"]) {
      const ok = await fetch(`http://127.0.0.1:${port}${prefix}/tasks?limit=1`, { headers: { ...tenant.headers, "x-request-id": `trace${prefix.replaceAll("/", "-")}` } });
      expect(ok.status).toBe(200);
    }
    await new Promise((r) => setTimeout(r, 200));
    const lines = gw
      .output()
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l));
    const line = lines.find((l) => l.requestId === "trace-123" && l.msg === "request");
    expect(line).toMatchObject({ service: "gateway", method: "GET", path: "/api/tasks/none", status: res.status });
    for (const prefix of ["/api", "/api/v1"]) {
      expect(lines.find((l) => l.requestId === `trace${prefix.replaceAll("/", "-")}` && l.msg === "request")).toMatchObject({ path: `${prefix}/tasks`, status: 200 });
    }
    expect(JSON.stringify(lines)).not.toContain(tenant.apiKey);
    await gw.stop();
    expect(gw.child.exitCode).toBe(0);
    await prisma.$disconnect();
  });

  it("ends open streams when it shuts down, so clients can re-attach elsewhere", async () => {
    const port = await freePort();
    const { databaseUrl, redisUrl, redisPrefix } = testEnv();
    const gw = startService("gateway", { PORT: String(port), DATABASE_URL: databaseUrl, REDIS_URL: redisUrl, REDIS_PREFIX: `${redisPrefix}:life2`, SHUTDOWN_STREAM_GRACE_MS: "500" });
    await waitForOk(`http://127.0.0.1:${port}/healthz`, gw);
    const prisma = testPrisma(databaseUrl);
    const tenant = await createTenant(prisma);
    // No worker listens on this prefix: the run stays queued and its stream stays open.
    const stream = watchSse(`http://127.0.0.1:${port}/api/run`, { body: { query: "waiting" }, headers: tenant.headers, timeoutMs: 20_000 });
    // A single-response request waiting for its run gets the run's current status (202).
    const waiting = fetch(`http://127.0.0.1:${port}/api/run`, {
      method: "POST",
      headers: { ...tenant.headers, "content-type": "application/json" },
      body: JSON.stringify({ query: "waiting too", stream: false }),
    });
    // Both are waiting for their runs (requests still being accepted would be cut by the grace).
    await stream.waitFor((e) => e.type === "run_started");
    await eventually(async () => (await prisma.run.count({ where: { orgId: tenant.orgId, query: "waiting too" } })) === 1);
    await new Promise((r) => setTimeout(r, 200));
    const t0 = Date.now();
    await gw.stop();
    const res = await stream.result;
    expect(res.events[0]!.data.type).toBe("run_started");
    const answer = await waiting;
    expect(answer.status).toBe(202);
    expect(await answer.json()).toEqual({ run_id: expect.any(String), task_id: expect.any(String), status: "queued" });
    expect(gw.child.exitCode).toBe(0);
    expect(Date.now() - t0).toBeLessThan(5000);
    await prisma.$disconnect();
  });
});

describe("memory service lifecycle", () => {
  it("finishes a request in progress though a second SIGTERM follows the first, then exits 0", async () => {
    const memory = await startMemoryService();
    const { port } = new URL(memory.url);
    const body = JSON.stringify({ org_id: "org_none", agent_id: "agt_none", user_id: "u1", query: "tea" });
    const socket = net.connect(Number(port), "127.0.0.1");
    await once(socket, "connect");
    let answer = "";
    socket.on("data", (d: Buffer) => (answer += d.toString()));
    // A request whose body is still arriving: the service must wait for it.
    socket.write(`POST /internal/memories/search HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${memory.token}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 10)}`);
    const exited = once(memory.process.child, "exit");
    await new Promise((r) => setTimeout(r, 200));
    memory.process.child.kill("SIGTERM");
    await new Promise((r) => setTimeout(r, 200));
    // A terminal or process manager may say it twice; the service still waits for the request.
    memory.process.child.kill("SIGTERM");
    await new Promise((r) => setTimeout(r, 500));
    expect(memory.process.child.exitCode).toBeNull();
    socket.write(body.slice(10));
    await eventually(async () => /^HTTP\/1\.1 200 /.test(answer) && answer);
    expect(await exited).toEqual([0, null]);
    socket.destroy();
  });
});
