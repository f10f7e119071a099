import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { REPO_ROOT } from "@agentrun/db";
import { eventually, freePort, testEnv, waitForOk } from "@agentrun/testing";

/** Whether something accepts connections on 127.0.0.1:`port`. */
export const listening = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = net.connect(port, "127.0.0.1");
    socket.once("connect", () => resolve(!socket.destroy()));
    socket.once("error", () => resolve(false));
  });

/** Pids of this machine's processes whose environment holds `marker` (a `NAME=value\0`). */
export function processesWith(marker: string): number[] {
  const found: number[] = [];
  for (const pid of fs.readdirSync("/proc").filter((d) => /^\d+$/.test(d))) {
    try {
      if (Number(pid) !== process.pid && fs.readFileSync(`/proc/${pid}/environ`, "utf8").includes(marker)) found.push(Number(pid));
    } catch {
      /* gone, or not ours to read */
    }
  }
  return found;
}

/** The command line of process `pid`, its arguments joined by spaces ("" when it is gone). */
export function commandLine(pid: number): string {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ");
  } catch {
    return "";
  }
}

export interface NpmStart {
  npm: ChildProcess;
  ports: { gateway: number; memory: number; model: number };
  gatewayUrl: string;
  /** `REDIS_PREFIX=<prefix>\0`: in the environment of npm and of every process it starts. */
  marker: string;
  /** What npm and the services printed so far. */
  output(): string;
  /** SIGTERM, then SIGKILL to whatever is left, and the log file removed: for `finally`. */
  cleanUp(): Promise<void>;
}

/**
 * `npm start` as a supervisor runs it: with a whole environment of its own (not that of the npm
 * running jest), its output to a file, in a process group of its own (as a terminal's job), and
 * every service reachable once this resolves.
 */
export async function startNpmStart(extraEnv: Record<string, string> = {}): Promise<NpmStart> {
  const [gateway, memory, model] = await Promise.all([freePort(), freePort(), freePort()]);
  const prefix = `${testEnv().redisPrefix}:npm-start-${gateway}`;
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
    ...extraEnv,
  };
  const logFile = path.join(os.tmpdir(), `agentrun-npm-start-${process.pid}-${gateway}.log`);
  const log = fs.openSync(logFile, "w");
  const npm = spawn("npm", ["start"], { cwd: REPO_ROOT, env, stdio: ["ignore", log, log], detached: true });
  fs.closeSync(log);
  const output = () => fs.readFileSync(logFile, "utf8");
  const marker = `REDIS_PREFIX=${prefix}\0`;
  const cleanUp = async () => {
    if (npm.exitCode === null && npm.signalCode === null) {
      npm.kill("SIGTERM");
      await new Promise((r) => {
        const t = setTimeout(r, 40_000);
        npm.once("exit", () => r(clearTimeout(t)));
      });
    }
    for (const pid of processesWith(marker)) process.kill(pid, "SIGKILL");
    fs.rmSync(logFile, { force: true });
  };
  try {
    await Promise.all([
      waitForOk(`http://127.0.0.1:${gateway}/readyz`, null, 60_000),
      waitForOk(`http://127.0.0.1:${memory}/healthz`, null, 60_000),
      waitForOk(`http://127.0.0.1:${model}/v1/models`, null, 60_000),
    ]);
  } catch (err) {
    const printed = output();
    await cleanUp();
    throw new Error(`${(err as Error).message}\n--- npm start printed:\n${printed.slice(-4000)}`);
  }
  return { npm, ports: { gateway, memory, model }, gatewayUrl: `http://127.0.0.1:${gateway}`, marker, output, cleanUp };
}

/** Waits until none of `stack`'s ports accepts connections and none of its processes is left. */
export async function expectStackGone(stack: NpmStart, timeoutMs: number): Promise<void> {
  await eventually(async () => {
    for (const port of Object.values(stack.ports)) expect([port, await listening(port)]).toEqual([port, false]);
    expect(processesWith(stack.marker).map(commandLine)).toEqual([]);
    return true;
  }, { timeoutMs });
}
