/**
 * `npm start`: the four services on this machine, each with the whole environment (the
 * configuration table of README.md says which variable each one reads), without the development
 * defaults and seeding of `npm run dev`. `WORKERS` agent workers (1 by default). SIGTERM, SIGINT
 * or SIGHUP (or npm's death: see `stopOnSignals`) stops them in order: the gateway and the
 * workers, then the memory service and the scripted model, so that the runs the workers let
 * finish still reach both. A service that exits
 * by itself stops the others, and this process exits 1, for a process manager to restart it all.
 */
import { z } from "zod";
import { ConfigError, loadConfig } from "@agentrun/config";
import { callerStopGraceMs, StackSupervisor, workersSetting } from "./stack-supervisor";

let workers: number;
try {
  ({ WORKERS: workers } = loadConfig(z.object({ WORKERS: workersSetting })));
} catch (err) {
  if (!(err instanceof ConfigError)) throw err;
  process.stderr.write(`${err.message}\n`);
  process.exit(1);
}

const stack = new StackSupervisor({ env: process.env, callerGraceMs: callerStopGraceMs(process.env) });
stack.stopOnSignals();
stack.start("scripted-model");
stack.start("memory");
stack.startWorkers(workers);
stack.start("gateway");
