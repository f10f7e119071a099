/**
 * `npm run dev`: the whole service on one machine with the embedded defaults. Creates the
 * database if it is missing, applies migrations, seeds a demo organization, key and agent on
 * first start, starts the scripted model, memory service, agent worker and gateway, and prints
 * the demo API key and agent id once everything is ready.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import pg from "pg";
import { Redis } from "ioredis";
import { z } from "zod";
import { databaseUrl, loadConfig, port, redisUrl } from "@agentrun/config";
import { ensureDatabase, migrateDeploy, REPO_ROOT } from "@agentrun/db";

// A local .env (see .env.example) applies to every service started from here.
if (fs.existsSync(path.join(REPO_ROOT, ".env"))) process.loadEnvFile(path.join(REPO_ROOT, ".env"));

const config = loadConfig(
  z.object({
    DATABASE_URL: databaseUrl,
    REDIS_URL: redisUrl,
    PORT: port(3000),
    MEMORY_PORT: port(3002),
    SCRIPTED_MODEL_PORT: port(4010),
    WORKERS: z.coerce.number().int().min(1).max(16).default(1),
  }),
);
const STATE_FILE = path.join(REPO_ROOT, ".agentrun-dev.json");
const HOW_TO_START = "start them with `docker compose up -d postgres redis` (or your local services)";

function fail(line: string): never {
  process.stderr.write(`${line}\n`);
  process.exit(1);
}

async function checkDependencies(): Promise<void> {
  const admin = new URL(config.DATABASE_URL);
  admin.pathname = "/postgres";
  const client = new pg.Client({ connectionString: admin.toString(), connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
    await client.end();
  } catch (err) {
    fail(`PostgreSQL is not reachable at ${admin.host} (${(err as Error).message}); ${HOW_TO_START}.`);
  }
  const redis = new Redis(config.REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 3000 });
  redis.on("error", () => {});
  try {
    await redis.connect();
    await redis.ping();
  } catch (err) {
    fail(`Redis is not reachable at ${new URL(config.REDIS_URL).host} (${(err as Error).message}); ${HOW_TO_START}.`);
  } finally {
    redis.disconnect();
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

async function seedDemo(): Promise<DemoState> {
  if (fs.existsSync(STATE_FILE)) {
    const state = JSON.parse(fs.readFileSync(STATE_FILE, "utf8")) as DemoState;
    const client = new pg.Client({ connectionString: config.DATABASE_URL });
    await client.connect();
    const found = await client.query("SELECT 1 FROM agents WHERE id = $1", [state.agent_id]);
    await client.end();
    if (state.database_url === config.DATABASE_URL && found.rowCount) return state;
  }
  const { org_id } = cli("org", "create", "--name", "Demo", "--plan", "pro", "--credits", "100000");
  const { api_key } = cli("key", "create", "--org", org_id!, "--name", "demo");
  const { agent_id } = cli("agent", "create", "--org", org_id!, "--name", "Demo agent", "--instructions", "You are a helpful assistant for {{user_name}}.");
  const state = { database_url: config.DATABASE_URL, org_id: org_id!, api_key: api_key!, agent_id: agent_id! };
  fs.writeFileSync(STATE_FILE, JSON.stringify(state, null, 2), { mode: 0o600 });
  return state;
}

const children: ChildProcess[] = [];
function start(service: string, env: Record<string, string>): void {
  const child = spawn(process.execPath, ["--import", "tsx", path.join(REPO_ROOT, "services", service, "src/index.ts")], {
    env: { ...process.env, DATABASE_URL: config.DATABASE_URL, REDIS_URL: config.REDIS_URL, ...env },
    stdio: ["ignore", "inherit", "inherit"],
  });
  child.on("exit", (code, signal) => {
    if (!stopping) fail(`${service} exited (${signal ?? code}); stopping.`);
  });
  children.push(child);
}

let stopping = false;
function stopAll(): void {
  stopping = true;
  for (const c of children) c.kill("SIGTERM");
  setTimeout(() => process.exit(0), 12_000).unref();
  Promise.all(children.map((c) => new Promise((r) => (c.exitCode !== null ? r(null) : c.once("exit", r))))).then(() => process.exit(0));
}

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
  await checkDependencies();
  if (await ensureDatabase(config.DATABASE_URL)) console.log(`created database ${new URL(config.DATABASE_URL).pathname.slice(1)}`);
  await migrateDeploy(config.DATABASE_URL);
  const demo = await seedDemo();
  const memoryUrl = `http://127.0.0.1:${config.MEMORY_PORT}`;
  const modelUrl = `http://127.0.0.1:${config.SCRIPTED_MODEL_PORT}/v1`;
  start("scripted-model", { PORT: String(config.SCRIPTED_MODEL_PORT) });
  start("memory", { PORT: String(config.MEMORY_PORT) });
  for (let i = 0; i < config.WORKERS; i++) start("agent-worker", { MEMORY_URL: memoryUrl, SCRIPTED_MODEL_URL: modelUrl });
  start("gateway", { PORT: String(config.PORT), MEMORY_URL: memoryUrl });
  process.on("SIGINT", stopAll);
  process.on("SIGTERM", stopAll);
  await waitReady(`http://127.0.0.1:${config.PORT}/readyz`);
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

main().catch((err) => fail(`npm run dev failed: ${(err as Error).message}`));
