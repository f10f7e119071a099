import type { Tenant } from "@agentrun/testing";
import type { BenchArgs } from "./args";
import type { ScenarioResult } from "./report";
import type { BenchStack } from "./stack";

/** What every scenario gets from the harness. */
export interface BenchContext {
  args: BenchArgs;
  /** Aborted on Ctrl-C: every loop stops. */
  signal: AbortSignal;
  redisUrl: string;
  /** REDIS_PREFIX of this invocation (`agentrun-bench-<timestamp>`). */
  redisPrefix: string;
  /** The benchmark database `agentrun_bench`, created and migrated. */
  databaseUrl: string;
  /** Where CPU profiles go when --profile is given. */
  profileDir?: string;
  /** The stack shared by the streaming scenarios, started on first use and stopped at the end. */
  streamingStack(): Promise<{ bench: BenchStack; tenant: Tenant }>;
  log(message: string): void;
}

export type ScenarioOutcome = Pick<ScenarioResult, "metrics" | "details"> & { error?: string };

export interface Scenario {
  name: string;
  description: string;
  /** Runs on the shared streaming stack (stopped once no later scenario needs it). */
  sharedStack?: boolean;
  run(ctx: BenchContext): Promise<ScenarioOutcome>;
}

/** Scales a request count or duration down for --quick runs. */
export const scaled = (ctx: BenchContext, full: number, quick: number) => (ctx.args.quick ? quick : full);
