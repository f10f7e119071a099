/**
 * `npm run dev`: the whole service on one machine with the embedded defaults. Creates the
 * database if it is missing, applies migrations, seeds a demo organization, key and agent on
 * first start, starts the scripted model, memory service, agent worker and gateway, and prints
 * the demo API key and agent id once everything is ready.
 */
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import pg from "pg";
import { Redis } from "ioredis";
import { z } from "zod";
import { ConfigError, databaseUrl, loadConfig, port, redisUrl, urlHostFor } from "@agentrun/config";
import { hashApiKey } from "@agentrun/api-keys";
import { ensureDatabase, migrateDeploy, REPO_ROOT } from "@agentrun/db";
import { callerStopGraceMs, StackSupervisor, workersSetting } from "./stack-supervisor";

// A local .env (see .env.example) applies to every service started from here.
if (fs.existsSync(path.join(REPO_ROOT, ".env"))) process.loadEnvFile(path.join(REPO_ROOT, ".env"));

const configSchema = z.object({
  DATABASE_URL: databaseUrl,
  REDIS_URL: redisUrl,
  PORT: port(3000),
  MEMORY_PORT: port(3002),
  SCRIPTED_MODEL_PORT: port(4010),
  WORKERS: workersSetting,
});

/** The environment, or one line naming each bad variable and exit 1, as the services do. */
function loadDevConfig(): z.infer<typeof configSchema> {
  try {
    return loadConfig(configSchema);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`${err.message}\n`);
    process.exit(1);
  }
}

const config = loadDevConfig();
const STATE_FILE = path.join(REPO_ROOT, ".agentrun-dev.json");
const HOW_TO_START = "start them with `docker compose up -d postgres redis` (or your local services)";

/** A reason to stop: main's catch prints it, stops every service started so far and exits 1. */
class DevFailure extends Error {}

function fail(line: string): never {
  throw new DevFailure(line);
}

/** SQLSTATEs of a refused login: unknown role or no pg_hba.conf entry (28000), wrong password (28P01). */
const LOGIN_REFUSED = ["28000", "28P01"];

/**
 * Where a dev service listens: its *_HOST, or 127.0.0.1 when unset or blank (`MEMORY_HOST=` in a
 * .env file counts as unset, as everywhere else, and must not open the service to the network).
 */
function devHost(name: "MEMORY_HOST" | "SCRIPTED_MODEL_HOST"): string {
  return process.env[name]?.trim() || "127.0.0.1";
}

async function checkDependencies(): Promise<void> {
  const admin = new URL(config.DATABASE_URL);
  admin.pathname = "/postgres";
  const client = new pg.Client({ connectionString: admin.toString(), connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
    await client.end();
  } catch (err) {
    const { code, message } = err as { code?: string; message: string };
    if (code && LOGIN_REFUSED.includes(code)) fail(`PostgreSQL at ${admin.host} refused the login in DATABASE_URL (${message}); check its user name and password.`);
    fail(`PostgreSQL is not reachable at ${admin.host} (${message}); ${HOW_TO_START}.`);
  }
  const redis = new Redis(config.REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 3000 });
  // What went wrong is in the connection's error event; connect() itself only says it closed.
  let cause: Error | undefined;
  redis.on("error", (err: Error) => (cause ??= err));
  try {
    await redis.connect();
    await redis.ping();
  } catch (err) {
    fail(`Redis is not reachable at ${new URL(config.REDIS_URL).host} (${(cause ?? (err as Error)).message}); ${HOW_TO_START}.`);
  } finally {
    redis.disconnect();
  }
}

/**
 * Fails when a port a service is about to listen on is taken (another `npm run dev`, say): the
 * readiness check would otherwise be answered by whatever listens there, and "ready" printed
 * for a stack that is about to stop.
 */
async function checkPortsFree(ports: { name: string; port: number; host?: string }[]): Promise<void> {
  for (const { name, port, host } of ports) {
    const server = net.createServer();
    const taken = await new Promise<boolean>((resolve, reject) => {
      server.once("error", (err: NodeJS.ErrnoException) => (err.code === "EADDRINUSE" ? resolve(true) : reject(err)));
      server.listen({ port, host, exclusive: true }, () => server.close(() => resolve(false)));
    });
    if (taken) fail(`port ${port} is already in use (another agentrun, perhaps); stop what listens there or set ${name}.`);
  }
}

function cli(...args: string[]): Record<string, string> {
  const r = spawnSync(process.execPath, [require.resolve("tsx/cli"), path.join(REPO_ROOT, "services/admin-cli/src/index.ts"), ...args], {
    env: { ...process.env, DATABASE_URL: config.DATABASE_URL },
    encoding: "utf8",
  });
  if (r.status !== 0) fail(`seeding failed: ${r.stderr.trim()}`);
  return JSON.parse(r.stdout);
}

interface DemoState {
  database_url: string;
  org_id: string;
  api_key: string;
  agent_id: string;
}

/** Whether the demo agent exists and the demo key is still usable, in the database the state was written for. */
async function stillUsable(state: DemoState): Promise<{ agent: boolean; key: boolean }> {
  if (state.database_url !== config.DATABASE_URL) return { agent: false, key: false };
  const client = new pg.Client({ connectionString: config.DATABASE_URL });
  await client.connect();
  try {
    const agent = await client.query("SELECT 1 FROM agents WHERE id = $1 AND org_id = $2", [state.agent_id, state.org_id]);
    const key = await client.query("SELECT 1 FROM api_keys WHERE key_hash = $1 AND org_id = $2 AND revoked_at IS NULL", [hashApiKey(state.api_key), state.org_id]);
    return { agent: agent.rowCount === 1, key: key.rowCount === 1 };
  } finally {
    await client.end();
  }
}

async function seedDemo(): Promise<DemoState> {
  if (fs.existsSync(STATE_FILE)) {
    const state = JSON.parse(fs.readFileSync(STATE_FILE, "utf8")) as DemoState;
    const usable = await stillUsable(state);
    if (usable.agent && usable.key) return state;
    if (usable.agent) {
      // The demo key was revoked or deleted: give the demo organization a new one.
      const { api_key } = cli("key", "create", "--org", state.org_id, "--name", "demo");
      return saveState({ ...state, api_key: api_key! });
    }
  }
  const { org_id } = cli("org", "create", "--name", "Demo", "--plan", "pro", "--credits", "100000");
  const { api_key } = cli("key", "create", "--org", org_id!, "--name", "demo");
  const { agent_id } = cli("agent", "create", "--org", org_id!, "--name", "Demo agent", "--instructions", "You are a helpful assistant for {{user_name}}.");
  return saveState({ database_url: config.DATABASE_URL, org_id: org_id!, api_key: api_key!, agent_id: agent_id! });
}

function saveState(state: DemoState): DemoState {
  fs.writeFileSync(STATE_FILE, JSON.stringify(state, null, 2), { mode: 0o600 });
  return state;
}

const stack = new StackSupervisor({
  env: { ...process.env, DATABASE_URL: config.DATABASE_URL, REDIS_URL: config.REDIS_URL },
  callerGraceMs: callerStopGraceMs(process.env),
});

async function waitReady(url: string): Promise<void> {
  for (let i = 0; i < 600; i++) {
    try {
      if ((await fetch(url, { signal: AbortSignal.timeout(1000) })).ok) return;
    } catch {
      /* not yet */
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  fail(`${url} did not become ready`);
}

async function main(): Promise<void> {
  await checkPortsFree([
    { name: "PORT", port: config.PORT },
    { name: "MEMORY_PORT", port: config.MEMORY_PORT, host: devHost("MEMORY_HOST") },
    { name: "SCRIPTED_MODEL_PORT", port: config.SCRIPTED_MODEL_PORT, host: devHost("SCRIPTED_MODEL_HOST") },
  ]);
  await checkDependencies();
  if (await ensureDatabase(config.DATABASE_URL)) console.log(`created database ${new URL(config.DATABASE_URL).pathname.slice(1)}`);
  await migrateDeploy(config.DATABASE_URL);
  const demo = await seedDemo();
  const memoryUrl = `http://${urlHostFor(process.env.MEMORY_HOST)}:${config.MEMORY_PORT}`;
  const modelUrl = `http://${urlHostFor(process.env.SCRIPTED_MODEL_HOST)}:${config.SCRIPTED_MODEL_PORT}/v1`;
  stack.stopOnSignals();
  // The scripted model and the memory service (whose internal token is a published default
  // here) are reached only from this machine, unless the operator says otherwise.
  stack.start("scripted-model", { SCRIPTED_MODEL_PORT: String(config.SCRIPTED_MODEL_PORT), SCRIPTED_MODEL_HOST: devHost("SCRIPTED_MODEL_HOST") });
  stack.start("memory", { MEMORY_PORT: String(config.MEMORY_PORT), MEMORY_HOST: devHost("MEMORY_HOST") });
  stack.startWorkers(config.WORKERS, { MEMORY_URL: memoryUrl, SCRIPTED_MODEL_URL: modelUrl });
  stack.start("gateway", { PORT: String(config.PORT), MEMORY_URL: memoryUrl });
  await waitReady(`http://127.0.0.1:${config.PORT}/readyz`);
  // A service that exited meanwhile is stopping the stack: no "ready" for it.
  if (stack.stopped) await stack.stopped;
  const base = `http://127.0.0.1:${config.PORT}`;
  console.log(
    [
      "",
      `agentrun is ready on ${base}`,
      `  demo API key:  ${demo.api_key}`,
      `  demo agent id: ${demo.agent_id}`,
      "",
      "Try it:",
      `  curl -N ${base}/api/run -H 'Authorization: Bearer ${demo.api_key}' -H 'X-Agent-Id: ${demo.agent_id}' -H 'Content-Type: application/json' -d '{"query":"Hello!"}'`,
      "",
    ].join("\n"),
  );
}

main().catch((err: Error) => stack.stop(1, err instanceof DevFailure ? err.message : `npm run dev failed: ${err.message}`));
