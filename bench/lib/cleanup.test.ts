import { spawn } from "node:child_process";
import { once } from "node:events";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { Redis } from "ioredis";
import { testEnv } from "@agentrun/testing";
import { onCleanup, runCleanups, signalExitCode } from "./cleanup";

describe("runCleanups", () => {
  it("makes a second caller wait until the cleanup the first one started has ended", async () => {
    const order: string[] = [];
    onCleanup("slow", async () => {
      await sleep(100);
      order.push("slow done");
    });
    onCleanup("fast", async () => void order.push("fast done"));
    const first = runCleanups();
    // The first pass has taken both entries off the list by now, and is inside the slow one.
    await sleep(10);
    expect(order).toEqual(["fast done"]);
    await runCleanups();
    expect(order).toEqual(["fast done", "slow done"]);
    await first;
  });

  it("runs each cleanup once, goes on past a failure, and runs those registered after a pass in the next one", async () => {
    const ran: string[] = [];
    const stderr = jest.spyOn(process.stderr, "write").mockImplementation(() => true);
    onCleanup("a", async () => void ran.push("a"));
    onCleanup("broken", async () => {
      throw new Error("no");
    });
    await Promise.all([runCleanups(), runCleanups()]);
    expect(ran).toEqual(["a"]);
    expect(stderr).toHaveBeenCalledWith("cleanup broken failed: no\n");
    stderr.mockRestore();
    onCleanup("b", async () => void ran.push("b"));
    await runCleanups();
    expect(ran).toEqual(["a", "b"]);
  });

  it("runs those registered after a pass that found nothing to run", async () => {
    await runCleanups();
    const ran: string[] = [];
    onCleanup("late", async () => void ran.push("late"));
    await runCleanups();
    expect(ran).toEqual(["late"]);
  });
});

describe("an interrupted harness", () => {
  const { redisUrl, redisPrefix } = testEnv();
  const redis = new Redis(redisUrl);
  afterAll(() => redis.quit());

  it.each(["SIGTERM", "SIGINT"] as const)("on %s deletes its Redis keys before it exits, with 128 + the signal's number", async (signal) => {
    const prefix = `${redisPrefix}:interrupted-run-${signal}`;
    const tsx = path.join(__dirname, "../../node_modules/.bin/tsx");
    const child = spawn(tsx, [path.join(__dirname, "interrupted-run.fixture.ts"), redisUrl, prefix], { stdio: ["ignore", "pipe", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const exited = once(child, "exit") as Promise<[number | null, NodeJS.Signals | null]>;
    try {
      await new Promise<void>((resolve, reject) => {
        child.stdout.on("data", (d: Buffer) => d.toString().includes("ready") && resolve());
        void exited.then(() => reject(new Error(`the fixture exited before it was ready: ${stderr}`)));
      });
      expect(await redis.keys(`${prefix}*`)).toHaveLength(2);
      child.kill(signal);
      const [code] = await exited;
      expect(code).toBe(signalExitCode(signal));
      expect(code).toBe(signal === "SIGINT" ? 130 : 143);
      expect(await redis.keys(`${prefix}*`)).toEqual([]);
    } finally {
      child.kill("SIGKILL");
      const left = await redis.keys(`${prefix}*`);
      if (left.length) await redis.del(...left);
    }
  });
});
