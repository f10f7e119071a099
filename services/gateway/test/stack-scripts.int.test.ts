import { spawnSync } from "node:child_process";
import { once } from "node:events";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import { REPO_ROOT } from "@agentrun/db";
import { eventually, freePort, testEnv } from "@agentrun/testing";
import { expectStackGone, listening, processesWith, startNpmStart } from "./npm-start.fixture";

jest.setTimeout(120_000);

it("npm run dev names each bad variable on one line and exits 1", () => {
  const r = spawnSync(process.execPath, ["--import", "tsx", path.join(REPO_ROOT, "scripts/dev.ts")], {
    cwd: REPO_ROOT,
    env: { ...process.env, PORT: "abc", WORKERS: "0" },
    encoding: "utf8",
    timeout: 30_000,
  });
  expect(r.status).toBe(1);
  expect(r.stderr.trim().split("\n")).toEqual([expect.stringMatching(/^invalid environment: PORT: .*; WORKERS: /)]);
});

it("npm start names a bad WORKERS on one line and exits 1, starting nothing", () => {
  const r = spawnSync(process.execPath, ["--import", "tsx", path.join(REPO_ROOT, "scripts/start.ts")], {
    cwd: REPO_ROOT,
    env: { ...process.env, WORKERS: "0" },
    encoding: "utf8",
    timeout: 30_000,
  });
  expect([r.status, r.stdout, r.stderr.trim().split("\n")]).toEqual([1, "", [expect.stringMatching(/^invalid environment: WORKERS: /)]]);
});

/** `npm run dev` with `env` added, run to its exit (it must fail before starting anything). */
const devFails = (env: Record<string, string>) =>
  spawnSync(process.execPath, ["--import", "tsx", path.join(REPO_ROOT, "scripts/dev.ts")], { cwd: REPO_ROOT, env: { ...process.env, ...env }, encoding: "utf8", timeout: 30_000 });

it("npm run dev says in one line which port is taken, which login was refused, why Redis is unreachable", async () => {
  const [taken, memory, model, closed] = await Promise.all([freePort(), freePort(), freePort(), freePort()]);
  const ports = { MEMORY_PORT: String(memory), SCRIPTED_MODEL_PORT: String(model) };
  // Something else on the gateway's port: refused before anything starts, never "ready".
  const other = net.createServer().listen(taken);
  await once(other, "listening");
  try {
    const r = devFails({ ...ports, PORT: String(taken), DATABASE_URL: testEnv().databaseUrl });
    expect([r.status, r.stdout, r.stderr.trim()]).toEqual([1, "", `port ${taken} is already in use (another agentrun, perhaps); stop what listens there or set PORT.`]);
  } finally {
    other.close();
  }
  const free = { ...ports, PORT: String(taken) };
  const login = devFails({ ...free, DATABASE_URL: "postgresql://agentrun_no_such_role@127.0.0.1:5432/x" });
  expect([login.status, login.stderr.trim().split("\n")]).toEqual([1, [expect.stringMatching(/^PostgreSQL at 127\.0\.0\.1:5432 refused the login in DATABASE_URL \(.*agentrun_no_such_role.*\); check its user name and password\.$/)]]);
  const redis = devFails({ ...free, DATABASE_URL: testEnv().databaseUrl, REDIS_URL: `redis://127.0.0.1:${closed}` });
  expect([redis.status, redis.stderr.trim().split("\n")]).toEqual([1, [expect.stringMatching(new RegExp(`^Redis is not reachable at 127\\.0\\.0\\.1:${closed} \\(connect ECONNREFUSED .*\\); start them with`))]]);
});

it("long-running npm scripts exec their command, so that a supervisor's SIGTERM to npm reaches it", () => {
  // npm runs a script as `sh -c <script>`; Debian's sh does not hand a signal on to its child,
  // so without `exec` a SIGTERM to npm stops npm and sh and leaves the stack running unseen.
  const scripts = (dir: string) => (JSON.parse(fs.readFileSync(path.join(REPO_ROOT, dir, "package.json"), "utf8")) as { scripts: Record<string, string> }).scripts;
  const root = scripts(".");
  const long = [root.dev, root.start, root.bench, ...["gateway", "agent-worker", "memory", "scripted-model"].map((s) => scripts(`services/${s}`).start)];
  for (const script of long) expect(script).toMatch(/^exec /);
});

it("npm start stops every service when npm itself gets SIGTERM, as a supervisor sends it", async () => {
  const stack = await startNpmStart();
  try {
    const exited = once(stack.npm, "exit");
    stack.npm.kill("SIGTERM");
    // Nothing is left serving within moments: the services got the signal, not only npm.
    await eventually(async () => {
      for (const port of Object.values(stack.ports)) expect([port, await listening(port)]).toEqual([port, false]);
      return true;
    }, { timeoutMs: 15_000 });
    expect(await exited).toEqual([0, null]);
    expect(processesWith(stack.marker)).toEqual([]);
  } catch (err) {
    throw new Error(`${(err as Error).message}\n--- npm start printed:\n${stack.output().slice(-4000)}`);
  } finally {
    await stack.cleanUp();
  }
});

it("npm start stops every service when npm dies without handing a signal on (SIGHUP, SIGKILL)", async () => {
  const stack = await startNpmStart();
  try {
    // npm passes only SIGINT and SIGTERM on to its script; SIGKILL leaves it no choice at all.
    stack.npm.kill("SIGKILL");
    await expectStackGone(stack, 30_000);
  } catch (err) {
    throw new Error(`${(err as Error).message}\n--- npm start printed:\n${stack.output().slice(-4000)}`);
  } finally {
    await stack.cleanUp();
  }
});
