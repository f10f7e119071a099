import { execFileSync } from "node:child_process";
import fs from "node:fs";
import https from "node:https";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { createTenant, freePort, startService, testEnv, testPrisma, waitForOk, type ServiceProcess, type Tenant } from "@agentrun/testing";
import type { PrismaClient } from "@agentrun/db";

let prisma: PrismaClient;
let tenant: Tenant;
let tmp: string;
const started: ServiceProcess[] = [];

beforeAll(async () => {
  prisma = testPrisma(testEnv().databaseUrl);
  tenant = await createTenant(prisma, { plan: "enterprise", rpmLimit: 100_000 });
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), "agentrun-tls-"));
});

afterAll(async () => {
  await Promise.all(started.map((p) => p.stop()));
  await prisma?.$disconnect();
  fs.rmSync(tmp, { recursive: true, force: true });
});

async function gateway(env: Record<string, string>): Promise<{ port: number; proc: ServiceProcess }> {
  const { databaseUrl, redisUrl, redisPrefix } = testEnv();
  const port = await freePort();
  const proc = startService("gateway", { DATABASE_URL: databaseUrl, REDIS_URL: redisUrl, REDIS_PREFIX: `${redisPrefix}:https-${port}`, PORT: String(port), ...env });
  started.push(proc);
  return { port, proc };
}

const codeOf = async (res: Response) => ({ status: res.status, code: res.status === 200 ? null : ((await res.json()) as any).error.code });

describe("REQUIRE_HTTPS=true behind no trusted proxy", () => {
  let url: string;
  beforeAll(async () => {
    const { port, proc } = await gateway({ REQUIRE_HTTPS: "true" });
    url = `http://127.0.0.1:${port}`;
    await waitForOk(`${url}/healthz`, proc);
  });

  it("refuses plain HTTP with 403 https_required before authentication", async () => {
    expect(await codeOf(await fetch(`${url}/api/memory`, { headers: tenant.headers }))).toEqual({ status: 403, code: "https_required" });
    expect(await codeOf(await fetch(`${url}/api/memory`))).toEqual({ status: 403, code: "https_required" });
    expect(await codeOf(await fetch(`${url}/api/openapi.json`))).toEqual({ status: 403, code: "https_required" });
    // Whatever the method, on the public paths too: only the health probes answer plain HTTP.
    for (const path of ["/api/openapi.json", "/api/v1/openapi.json", "/widget.js", "/widget-demo", "/api/tasks"]) {
      expect([path, await codeOf(await fetch(`${url}${path}`, { method: "OPTIONS" }))]).toEqual([path, { status: 403, code: "https_required" }]);
    }
  });

  it("ignores X-Forwarded-Proto from a peer that is not a trusted proxy", async () => {
    const res = await fetch(`${url}/api/memory`, { headers: { ...tenant.headers, "x-forwarded-proto": "https" } });
    expect(await codeOf(res)).toEqual({ status: 403, code: "https_required" });
  });

  it("leaves /healthz and /readyz to load balancers over plain HTTP", async () => {
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    expect([200, 503]).toContain((await fetch(`${url}/readyz`)).status);
    expect((await fetch(`${url}/readyz`)).headers.get("content-type")).toMatch(/json/);
  });
});

describe("REQUIRE_HTTPS=true behind a trusted proxy", () => {
  it("accepts what the proxy says arrived over HTTPS, and only that", async () => {
    const { port, proc } = await gateway({ REQUIRE_HTTPS: "true", TRUST_PROXY: "loopback" });
    const url = `http://127.0.0.1:${port}`;
    await waitForOk(`${url}/healthz`, proc);
    expect(await codeOf(await fetch(`${url}/api/tasks`, { headers: { ...tenant.headers, "x-forwarded-proto": "https" } }))).toEqual({ status: 200, code: null });
    expect(await codeOf(await fetch(`${url}/api/memory`, { headers: { ...tenant.headers, "x-forwarded-proto": "http" } }))).toEqual({ status: 403, code: "https_required" });
    expect(await codeOf(await fetch(`${url}/api/memory`, { headers: tenant.headers }))).toEqual({ status: 403, code: "https_required" });
  });
});

describe("direct TLS", () => {
  let cert: string;
  beforeAll(() => {
    execFileSync("openssl", ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost", "-keyout", path.join(tmp, "key.pem"), "-out", path.join(tmp, "cert.pem")], { stdio: "ignore" });
    cert = fs.readFileSync(path.join(tmp, "cert.pem"), "utf8");
  });

  /** A GET over HTTPS that trusts only the test certificate. */
  const get = (port: number, p: string, headers: Record<string, string> = {}) =>
    new Promise<{ status: number; headers: Record<string, unknown>; body: string }>((resolve, reject) => {
      const req = https.get({ host: "127.0.0.1", port, path: p, headers, ca: cert }, (res) => {
        let body = "";
        res.on("data", (d) => (body += d));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      });
      req.on("error", reject);
    });

  async function waitForHttps(port: number, proc: ServiceProcess): Promise<void> {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const ok = await get(port, "/healthz").then((r) => r.status === 200, () => false);
      if (ok) return;
      if (Date.now() > deadline || proc.child.exitCode !== null) throw new Error(`no HTTPS gateway:\n${proc.output()}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  it("serves HTTPS when TLS_CERT_FILE and TLS_KEY_FILE are set, and counts it as secure", async () => {
    const { port, proc } = await gateway({ REQUIRE_HTTPS: "true", TLS_CERT_FILE: path.join(tmp, "cert.pem"), TLS_KEY_FILE: path.join(tmp, "key.pem") });
    await waitForHttps(port, proc);
    const res = await get(port, "/api/tasks", tenant.headers);
    expect(res.status).toBe(200);
    expect(res.headers["strict-transport-security"]).toMatch(/max-age=\d+/);
    // Plain HTTP on the TLS port gets no answer from the API.
    await expect(fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(3000) }).then((r) => r.status)).rejects.toThrow();
  });

  it("closes connections whose TLS handshake never comes within REQUEST_TIMEOUT_MS, and still stops on SIGTERM", async () => {
    const { port, proc } = await gateway({ TLS_CERT_FILE: path.join(tmp, "cert.pem"), TLS_KEY_FILE: path.join(tmp, "key.pem"), REQUEST_TIMEOUT_MS: "1000" });
    await waitForHttps(port, proc);
    // Connections that send nothing (a port scan, a stalled client): each is closed by the gateway.
    const silent = await Promise.all(Array.from({ length: 5 }, () => new Promise<net.Socket>((resolve, reject) => {
      const socket = net.connect(port, "127.0.0.1", () => resolve(socket)).on("error", reject);
    })));
    const t0 = Date.now();
    const closedAt = await Promise.all(silent.map((s) => new Promise<number>((resolve) => s.on("close", () => resolve(Date.now())))));
    expect(Math.max(...closedAt) - t0).toBeLessThan(5000);
    // Held open until they were closed, such sockets kept the gateway from ever finishing its shutdown.
    const exited = new Promise<number | null>((resolve) => proc.child.once("exit", resolve));
    proc.child.kill("SIGTERM");
    expect(await Promise.race([exited, new Promise((r) => setTimeout(() => r("still running"), 10_000))])).toBe(0);
  });

  it.each([
    ["only one of the two files", { TLS_CERT_FILE: "CERT" }, /TLS_CERT_FILE: set both TLS_CERT_FILE and TLS_KEY_FILE/],
    ["a file that cannot be read", { TLS_CERT_FILE: "CERT", TLS_KEY_FILE: "/nonexistent/key.pem" }, /TLS_KEY_FILE: is not a readable file/],
  ])("refuses to start with %s", async (_, env, message) => {
    const resolved = Object.fromEntries(Object.entries(env).map(([k, v]) => [k, v === "CERT" ? path.join(tmp, "cert.pem") : v]));
    const { proc } = await gateway(resolved);
    const code = await new Promise<number | null>((resolve) => proc.child.once("exit", resolve));
    expect(code).not.toBe(0);
    expect(proc.output()).toMatch(message);
  });
});
