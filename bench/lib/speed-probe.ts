import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { once } from "node:events";
import net from "node:net";
import { performance } from "node:perf_hooks";
import { trackPid } from "./cleanup";

/**
 * A fixed piece of single-threaded CPU work (the kind the services do per event: JSON of small
 * events, hashing), timed on an idle machine. This VM's speed drifts by up to 2× between hours;
 * the same probe before and after a run tells how fast the machine was while the figures were
 * taken, so that runs of different hours can be compared. Median of `rounds`, in ms: lower is
 * faster.
 */
export function speedProbeMs(rounds = 7): number {
  const event = { seq: 1, type: "text_chunk", run_id: "run_0198f2b1c3d47e8a9b0c1d2e3f405162", content: "a word or two " };
  const events = Array.from({ length: 20 }, (_, i) => ({ ...event, seq: i + 2 }));
  const block = Buffer.alloc(1 << 20, 7);
  const times: number[] = [];
  let sink = 0;
  for (let r = 0; r < rounds; r++) {
    const t0 = performance.now();
    for (let i = 0; i < 2_000; i++) sink += (JSON.parse(JSON.stringify(events)) as unknown[]).length;
    const hash = createHash("sha256");
    for (let i = 0; i < 16; i++) hash.update(block);
    sink += hash.digest()[0]!;
    times.push(performance.now() - t0);
  }
  if (sink < 0) throw new Error("unreachable"); // keeps the work observable
  times.sort((a, b) => a - b);
  return Math.round(times[Math.floor(times.length / 2)]! * 10) / 10;
}

const ECHO_SERVER = `
const net = require("node:net");
const server = net.createServer((s) => { s.setNoDelay(true); s.on("error", () => s.destroy()); s.on("data", (d) => s.write(d)); });
server.listen(0, "127.0.0.1", () => process.stdout.write(String(server.address().port) + "\\n"));
`;

/**
 * Median time of one loopback TCP round trip to another process (16 bytes each way, one at a
 * time), in µs: the cost that dominates this service's hops between gateway, Redis, PostgreSQL,
 * workers and model, and the part of this VM's speed that drifts most.
 */
export async function loopbackRoundTripUs(count = 4000): Promise<number> {
  const child = spawn(process.execPath, ["-e", ECHO_SERVER], { stdio: ["ignore", "pipe", "inherit"] });
  trackPid(child.pid); // killed by the harness's Ctrl-C handling too
  try {
    const port = await new Promise<number>((resolve, reject) => {
      child.once("error", reject);
      child.stdout.once("data", (d: Buffer) => resolve(Number(d.toString().trim())));
    });
    const socket = net.connect(port, "127.0.0.1");
    socket.setNoDelay(true);
    await once(socket, "connect");
    const payload = Buffer.alloc(16, 1);
    const times: number[] = [];
    for (let i = 0; i < count; i++) {
      const t0 = performance.now();
      const reply = once(socket, "data");
      socket.write(payload);
      await reply;
      times.push(performance.now() - t0);
    }
    socket.destroy();
    times.sort((a, b) => a - b);
    return Math.round(times[Math.floor(times.length / 2)]! * 1000);
  } finally {
    child.kill();
  }
}
