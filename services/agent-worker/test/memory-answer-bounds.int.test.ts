import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { createTenant, startStack, testEnv, testPrisma, type Stack, type Tenant } from "@agentrun/testing";
import type { PrismaClient } from "@agentrun/db";

// A memory service that answers a run's context call with more than was asked, and with
// another user's entries (a faulty or mismatched version): the prompt holds only what the run
// asked for, its own user's entries within MEMORY_PROMPT_MAX_COUNT and MEMORY_PROMPT_MAX_CHARS;
// an answer of more entries than asked for, or of more bytes than any answer may have, is not
// the contract's and is left out whole (the run goes on without memories).
const MAX_COUNT = 7;
const MAX_CHARS = 2500;

let fake: Server;
let stack: Stack;
let prisma: PrismaClient;
let tenant: Tenant;
let asked: { max_count?: number; max_chars?: number; user_id?: string } = {};

const entry = (i: number, userId: string, chars: number) => ({
  memory_id: `mem_${i}`, content: `${userId}-${i}-`.padEnd(chars, "x"), category: "fact", user_id: userId, created_at: new Date().toISOString(),
});
// In the order given: another user's, three of 1,000 characters (the third would pass 2,500), then short ones.
const FAULTY = [entry(0, "intruder", 10), entry(1, "u1", 1000), entry(2, "u1", 1000), entry(3, "u1", 1000), entry(4, "intruder", 10), entry(5, "u1", 20), entry(6, "u1", 20)];
let answer: unknown[] = FAULTY;

beforeAll(async () => {
  fake = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      if (req.url === "/internal/memories/context") asked = JSON.parse(body);
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ memories: req.url === "/internal/memories/context" ? answer : [] }));
    });
  });
  await new Promise<void>((resolve) => fake.listen(0, "127.0.0.1", resolve));
  const memoryUrl = `http://127.0.0.1:${(fake.address() as AddressInfo).port}`;
  stack = await startStack({ workers: 1, memory: false, workerEnv: { MEMORY_URL: memoryUrl, MEMORY_PROMPT_MAX_COUNT: String(MAX_COUNT), MEMORY_PROMPT_MAX_CHARS: String(MAX_CHARS) } });
  prisma = testPrisma(testEnv().databaseUrl);
  tenant = await createTenant(prisma, { instructions: "Be brief." });
}, 60_000);

afterAll(async () => {
  await stack?.stop();
  await prisma?.$disconnect();
  fake?.closeAllConnections();
  await new Promise((resolve) => fake?.close(resolve));
});

/** The entries of the run's system prompt (echoed by the scripted model), after a context answer of `entries`. */
async function promptEntries(entries: unknown[]): Promise<string[]> {
  answer = entries;
  asked = {};
  const res = await fetch(`${stack.gatewayUrl}/api/run`, {
    method: "POST",
    headers: { ...tenant.headers, "content-type": "application/json" },
    body: JSON.stringify({ query: "[echo-system]", context: { user_id: "u1" }, stream: false }),
  });
  expect(res.status).toBe(200);
  const run = (await res.json()) as { status: string; output: string };
  expect(asked).toMatchObject({ user_id: "u1", max_count: MAX_COUNT, max_chars: MAX_CHARS });
  expect(run.status).toBe("completed");
  expect(run.output).toContain("Be brief.");
  expect(run.output).not.toContain("intruder");
  return run.output.split("\n").flatMap((l) => /^- \(fact\) (\w+-\d+)-/.exec(l)?.[1] ?? []);
}

it("puts only the run's user's entries in the prompt, within the count and characters it asked for", async () => {
  expect(await promptEntries(FAULTY)).toEqual(["u1-1", "u1-2", "u1-5", "u1-6"]);
}, 60_000);

it("leaves out whole an answer of more entries than asked for, or larger than any answer may be", async () => {
  expect(await promptEntries([...FAULTY, entry(7, "u1", 10)])).toEqual([]);
  // One short entry with a field of 5 million characters besides (5 MB): past MEMORY_ANSWER_MAX_BYTES.
  expect(await promptEntries([{ ...entry(10, "u1", 10), padding: "x".repeat(5_000_000) }])).toEqual([]);
  // A well-formed answer still counts.
  expect(await promptEntries([entry(20, "u1", 10)])).toEqual(["u1-20"]);
}, 60_000);
