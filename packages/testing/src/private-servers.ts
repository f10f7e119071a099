import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { freePort } from "./processes";

/** A Redis server of a test's own, which the test may stop and start again on the same port. */
export interface PrivateRedis {
  url: string;
  port: number;
  start(): Promise<void>;
  /** Kills the server; with no persistence, its data is gone. */
  stop(): Promise<void>;
  /**
   * Suspends the server (SIGSTOP): connections stay open and take every command, and nothing
   * is answered, as from a hung server or a half-open connection.
   */
  freeze(): void;
  /** Resumes a frozen server (SIGCONT): commands sent meanwhile are answered then. */
  thaw(): void;
}

export async function startPrivateRedis(): Promise<PrivateRedis> {
  const port = await freePort();
  let child: ChildProcess | null = null;
  /** Whether the server answering on the port is the process `pid`. */
  const answeredBy = (pid: number | undefined) => spawnSync("redis-cli", ["-p", String(port), "info", "server"], { encoding: "utf8" }).stdout?.includes(`process_id:${pid}\r`);
  const server: PrivateRedis = {
    url: `redis://127.0.0.1:${port}`,
    port,
    async start() {
      const own = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], { stdio: "ignore" });
      child = own;
      // Answered by this server, not by another that took the port meanwhile (this one then exits).
      const up = () => own.exitCode === null && answeredBy(own.pid);
      for (let i = 0; i < 100 && !up(); i++) await new Promise((r) => setTimeout(r, 50));
      if (!up()) {
        // One alive but slow to answer is not left running.
        await server.stop();
        throw new Error(`private redis on ${port} did not start${own.exitCode !== null ? ` (it exited with ${own.exitCode}: port taken?)` : ""}`);
      }
    },
    async stop() {
      const c = child;
      child = null;
      if (!c || c.exitCode !== null) return;
      const exited = new Promise((r) => c.once("exit", r));
      c.kill("SIGKILL");
      await exited;
    },
    freeze() {
      if (!child?.pid) throw new Error("private redis is not running");
      process.kill(child.pid, "SIGSTOP");
    },
    thaw() {
      if (child?.pid) process.kill(child.pid, "SIGCONT");
    },
  };
  await server.start();
  return server;
}

/** A PostgreSQL cluster of a test's own (initdb in a temp folder), which the test may stop and start. */
export interface PrivatePostgres {
  /** URL of the database `agentrun` in the cluster. */
  url: string;
  port: number;
  start(): Promise<void>;
  stop(): Promise<void>;
  /**
   * Suspends every process of the cluster (SIGSTOP): it still accepts TCP connections but
   * answers nothing, as a hung database host or a network partition looks to its clients.
   */
  freeze(): void;
  /** Resumes a frozen cluster (SIGCONT): statements sent meanwhile are carried out then. */
  thaw(): void;
  /** Stops the cluster and removes its folder. */
  destroy(): Promise<void>;
}

/** The postmaster of the cluster in `dir` and its child processes. */
function clusterPids(dir: string): number[] {
  const postmaster = Number(fs.readFileSync(path.join(dir, "postmaster.pid"), "utf8").split("\n")[0]);
  const children = spawnSync("pgrep", ["-P", String(postmaster)], { encoding: "utf8" }).stdout.split("\n").filter(Boolean).map(Number);
  return [postmaster, ...children];
}

/**
 * Sends `signal` to the cluster's postmaster, then to its children. A child listed may be gone by
 * its turn: a backend that exited while the postmaster was stopped is a zombie until the
 * postmaster, continued first, reaps it; that one is skipped.
 */
function signalCluster(dir: string, signal: NodeJS.Signals): void {
  for (const pid of clusterPids(dir)) {
    try {
      process.kill(pid, signal);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ESRCH") throw err;
    }
  }
}

function pgBin(name: string): string {
  const root = "/usr/lib/postgresql";
  const versions = fs.existsSync(root) ? fs.readdirSync(root).sort() : [];
  for (const v of versions.reverse()) {
    const p = path.join(root, v, "bin", name);
    if (fs.existsSync(p)) return p;
  }
  return name;
}

export async function startPrivatePostgres(): Promise<PrivatePostgres> {
  const port = await freePort();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "agentrun-pg-"));
  // initdb refuses to run as root: run the cluster as the postgres system user when we are root.
  const asUser = process.getuid?.() === 0 ? ["runuser", "-u", "postgres", "--"] : [];
  if (asUser.length) spawnSync("chown", ["postgres", dir]);
  const run = (bin: string, args: string[]) => {
    const [cmd, ...rest] = [...asUser, pgBin(bin), ...args];
    const r = spawnSync(cmd!, rest, { encoding: "utf8" });
    if (r.status !== 0) throw new Error(`${bin} failed: ${r.stderr || r.stdout}`);
  };
  const server: PrivatePostgres = {
    url: `postgresql://postgres@127.0.0.1:${port}/agentrun`,
    port,
    async start() {
      run("pg_ctl", ["-D", dir, "-o", `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off`, "-l", path.join(dir, "log"), "-w", "start"]);
    },
    async stop() {
      run("pg_ctl", ["-D", dir, "-m", "immediate", "-w", "stop"]);
    },
    freeze() {
      signalCluster(dir, "SIGSTOP");
    },
    thaw() {
      signalCluster(dir, "SIGCONT");
    },
    async destroy() {
      try {
        server.thaw();
      } catch {
        /* not running */
      }
      try {
        await server.stop();
      } catch {
        /* already stopped */
      }
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    run("initdb", ["-D", dir, "-A", "trust", "-U", "postgres", "--no-sync"]);
    await server.start();
  } catch (err) {
    // A cluster that started halfway (pg_ctl gave up waiting) is stopped, and its folder goes.
    await server.destroy();
    throw err;
  }
  return server;
}
