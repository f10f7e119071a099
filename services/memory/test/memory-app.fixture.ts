import { randomUUID } from "node:crypto";
import type { Express } from "express";
import supertest from "supertest";
import { createPrisma, type PrismaClient } from "@agentrun/db";
import { createLogger } from "@agentrun/logger";
import { testEnv } from "@agentrun/testing";
import { createApp } from "../src/app";

export const TOKEN = "test-internal-token-0123456789";
export const AUTH = { authorization: `Bearer ${TOKEN}` };

export interface MemoryTestApp {
  app: Express;
  prisma: PrismaClient;
  close(): Promise<void>;
}

/** The memory app on the run's test database, as index.ts wires it. */
export function memoryTestApp(): MemoryTestApp {
  const prisma = createPrisma({ databaseUrl: testEnv().databaseUrl, poolSize: 5 });
  const app = createApp({ prisma, logger: createLogger({ service: "memory", level: "silent" }), internalToken: TOKEN });
  return { app, prisma, close: () => prisma.$disconnect() };
}

/**
 * The memory app for a whole test file: made before its first test and closed after its last.
 * Its `app` and `prisma` are those of the running file; `api()` is a supertest agent on it.
 */
export function memoryAppForFile(): Omit<MemoryTestApp, "close"> & { api(): ReturnType<typeof supertest> } {
  let t: MemoryTestApp | undefined;
  beforeAll(() => {
    t = memoryTestApp();
  });
  afterAll(async () => {
    await t?.close();
  });
  const current = (): MemoryTestApp => {
    if (!t) throw new Error("the memory app is made in beforeAll: use it within the file's tests");
    return t;
  };
  return {
    get app() {
      return current().app;
    },
    get prisma() {
      return current().prisma;
    },
    api: () => supertest(current().app),
  };
}

/** A fresh (org, agent) scope, so tests never see each other's rows. */
export function newScope(): { org_id: string; agent_id: string } {
  return { org_id: `org_test_${randomUUID()}`, agent_id: `agt_test_${randomUUID()}` };
}

/** Creates memories one after another (so their order is their creation order); returns their ids. */
export async function seed(app: Express, scope: { org_id: string; agent_id: string }, user_id: string, contents: string[]): Promise<string[]> {
  const ids: string[] = [];
  for (const content of contents) {
    const res = await supertest(app).post("/internal/memories").set(AUTH).send({ ...scope, user_id, content }).expect(201);
    ids.push(res.body.memory.memory_id);
  }
  return ids;
}
