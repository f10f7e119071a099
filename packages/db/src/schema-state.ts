import fs from "node:fs";
import path from "node:path";
import type { PrismaClient } from "./client";
import { REPO_ROOT } from "./database";

/** How the database looks to a service: reachable and migrated, or reachable without the newest migration. */
export type SchemaState = "ok" | "not_migrated";

let newest: string | undefined;

/** The name of the newest committed migration (prisma/migrations), which this code needs applied. Read once. */
export function latestMigration(): string {
  newest ??= fs
    .readdirSync(path.join(REPO_ROOT, "prisma/migrations"), { withFileTypes: true })
    .filter((d) => d.isDirectory())
    .map((d) => d.name)
    .sort()
    .at(-1);
  if (!newest) throw new Error("no migrations found under prisma/migrations");
  return newest;
}

/**
 * Whether the database has this code's newest migration applied: `not_migrated` for a database
 * that lacks it (or has no migrations table at all), which every request would fail on. Rejects
 * when the database cannot be reached. A database migrated further by newer code is `ok`.
 */
export async function schemaState(prisma: PrismaClient): Promise<SchemaState> {
  try {
    const [row] = await prisma.$queryRaw<{ applied: boolean }[]>`
      SELECT EXISTS (SELECT 1 FROM _prisma_migrations WHERE migration_name = ${latestMigration()} AND finished_at IS NOT NULL AND rolled_back_at IS NULL) AS applied`;
    return row?.applied ? "ok" : "not_migrated";
  } catch (err) {
    // `relation "_prisma_migrations" does not exist`: a database never migrated.
    if (/_prisma_migrations/.test((err as Error)?.message ?? "")) return "not_migrated";
    throw err;
  }
}

/**
 * Longest wait for one readiness check of a service's `/readyz`: a probe gets its answer within a
 * second (Kubernetes' default probe timeout), even from a database that stopped answering.
 */
export const READY_CHECK_TIMEOUT_MS = 900;

/** A readiness check: `check`, or a rejection with "timeout" once READY_CHECK_TIMEOUT_MS have passed without its settling. */
export function readyCheck<T>(check: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error("timeout")), READY_CHECK_TIMEOUT_MS);
    timer.unref();
  });
  return Promise.race([check, late]).finally(() => clearTimeout(timer));
}
