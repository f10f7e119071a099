import { spawn, spawnSync } from "node:child_process";
import { once } from "node:events";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { REPO_ROOT } from "@agentrun/db";
import { eventually, freePort, testEnv, waitForOk } from "@agentrun/testing";

jest.setTimeout(120_000);

/** Whether something accepts connections on 127.0.0.1:`port`. */
const listening = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = net.connect(port, "127.0.0.1");
    socket.once("connect", () => resolve(!socket.destroy()));
    socket.once("error", () => resolve(false));
  });

/** Last resort after a failure: SIGKILL every process of this machine whose environment holds `marker`. */
function killProcessesWith(marker: string): void {
  for (const pid of fs.readdirSync("/proc").filter((d) => /^\d+$/.test(d))) {
    try {
      if (Number(pid) !== process.pid && fs.readFileSync(`/proc/${pid}/environ`, "utf8").includes(marker)) process.kill(Number(pid), "SIGKILL");
    } catch {
      /* gone, or not ours to read */
    }
  }
}

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
  const [gateway, memory, model] = await Promise.all([freePort(), freePort(), freePort()]);
  const prefix = `${testEnv().redisPrefix}:npm-start-${gateway}`;
  // The environment of a supervisor, not of the npm that runs jest.
  const outer = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_|^INIT_CWD$|^JEST_|^NODE_ENV$/i.test(k)));
  const env = {
    ...outer,
    DATABASE_URL: testEnv().databaseUrl,
    REDIS_PREFIX: prefix,
    PORT: String(gateway),
    MEMORY_PORT: String(memory),
    SCRIPTED_MODEL_PORT: String(model),
    MEMORY_URL: `http://127.0.0.1:${memory}`,
    SCRIPTED_MODEL_URL: `http://127.0.0.1:${model}/v1`,
    LOG_LEVEL: "warn",
  };
  // Output to a file, as a supervisor's log: a pipe that closes with npm would stop turbo anyway.
  const logFile = path.join(os.tmpdir(), `agentrun-npm-start-${process.pid}-${gateway}.log`);
  const log = fs.openSync(logFile, "w");
  const npm = spawn("npm", ["start"], { cwd: REPO_ROOT, env, stdio: ["ignore", log, log] });
  fs.closeSync(log);
  const output = () => fs.readFileSync(logFile, "utf8");
  try {
    await Promise.all([
      waitForOk(`http://127.0.0.1:${gateway}/readyz`, null, 60_000),
      waitForOk(`http://127.0.0.1:${memory}/healthz`, null, 60_000),
      waitForOk(`http://127.0.0.1:${model}/v1/models`, null, 60_000),
    ]);
    const exited = once(npm, "exit");
    npm.kill("SIGTERM");
    // Nothing is left serving within moments: the services got the signal (through turbo), not only npm.
    await eventually(async () => {
      for (const port of [gateway, memory, model]) expect([port, await listening(port)]).toEqual([port, false]);
      return true;
    }, { timeoutMs: 15_000 });
    await exited;
  } catch (err) {
    throw new Error(`${(err as Error).message}\n--- npm start printed:\n${output().slice(-4000)}`);
  } finally {
    // On a failure, stop the stack the way the test expects it to stop, then for good.
    if (npm.exitCode === null) {
      npm.kill("SIGTERM");
      await Promise.race([once(npm, "exit"), new Promise((r) => setTimeout(r, 30_000))]);
      if (npm.exitCode === null) npm.kill("SIGKILL");
    }
    killProcessesWith(`REDIS_PREFIX=${prefix}\0`);
    fs.rmSync(logFile, { force: true });
  }
});
