import { generateApiKey } from "@agentrun/api-keys";
import { newId } from "@agentrun/db";
import { createTenant, createWidgetKey, eventually, postRun, readSse, stackWithTenant, watchSse, within, type Stack, type Tenant } from "@agentrun/testing";
import type { PrismaClient } from "@agentrun/db";

// A revoked key stops working within a second on every instance: answers it holds open too (event
// streams, JSON answers waiting for their run), not only its new requests. The run goes on.
let stack: Stack;
let prisma: PrismaClient;

stackWithTenant((started) => ({ stack, prisma } = started), { stack: { workers: 1 } });

/** A second API key of `t`'s organization, with headers for `t`'s agent. */
async function secondKey(t: Tenant): Promise<{ keyId: string; headers: Record<string, string> }> {
  const key = generateApiKey();
  const keyId = newId("key");
  await prisma.apiKey.create({ data: { id: keyId, orgId: t.orgId, prefix: key.prefix, keyHash: key.keyHash, name: "second" } });
  return { keyId, headers: { authorization: `Bearer ${key.apiKey}`, "x-agent-id": t.agentId } };
}

const revoke = (keyId: string) => prisma.apiKey.update({ where: { id: keyId }, data: { revokedAt: new Date() } });
const runStatus = async (runId: string) => (await prisma.run.findUniqueOrThrow({ where: { id: runId } })).status;
/** Thirty chunks 300 ms apart: about 9 s of answer, long past a revocation on a busy machine. */
const LONG = "[sleep:300][chunks:30] a long answer to cut, with enough text for thirty chunks";
/** Longest a revocation may take to end an open answer here: the cache's 900 ms and a busy machine's delays. */
const ENDED_WITHIN_MS = 3000;

describe("an API key revoked while its answers are open", () => {
  it("ends its event streams within about a second, leaves other keys' streams alone, and lets the run finish", async () => {
    const t = await createTenant(prisma);
    const other = await secondKey(t);
    const stream = watchSse(`${stack.gatewayUrl}/api/run`, { headers: t.headers, body: { query: LONG } });
    await stream.waitFor((e) => e.type === "text_chunk");
    const { run_id: runId, task_id: taskId } = stream.events[0];
    const eventsUrl = `${stack.gatewayUrl}/api/tasks/${taskId}/runs/${runId}/events`;
    const kept = watchSse(eventsUrl, { headers: other.headers });
    await kept.waitFor((e) => e.type === "text_chunk");

    const revokedAt = Date.now();
    await revoke(t.keyId);
    const ended = await within(stream.result, 6000);
    expect(ended).not.toBe("timed out");
    expect(Date.now() - revokedAt).toBeLessThan(ENDED_WITHIN_MS);
    expect(stream.events.at(-1).type).toBe("text_chunk");
    // Its re-attach is refused like any request with the key.
    const again = await readSse(eventsUrl, { headers: { ...t.headers, "last-event-id": String(stream.events.at(-1).seq) } });
    expect({ status: again.status, code: again.body?.error?.code }).toEqual({ status: 401, code: "unauthorized" });

    // The other key's stream, and the run, go on to the end.
    const rest = await kept.result;
    expect(rest.events.at(-1)!.data).toMatchObject({ type: "run_completed", run_id: runId });
    expect(await runStatus(runId)).toBe("completed");
  });

  it("answers a JSON request waiting for its run 401, and the run goes on", async () => {
    const t = await createTenant(prisma);
    const waiting = postRun(stack.gatewayUrl, t.headers, { query: LONG, stream: false });
    const run = await eventually(() => prisma.run.findFirst({ where: { orgId: t.orgId, status: "running" } }));
    const revokedAt = Date.now();
    await revoke(t.keyId);
    const answer = await waiting;
    const res = { status: answer.status, challenge: answer.headers.get("www-authenticate"), body: (await answer.json()) as any };
    expect(Date.now() - revokedAt).toBeLessThan(ENDED_WITHIN_MS);
    expect({ status: res.status, code: res.body.error?.code }).toEqual({ status: 401, code: "unauthorized" });
    expect(res.challenge).toBe('Bearer realm="agentrun", error="invalid_token"');
    // It names the run it accepted, so that the caller does not start a second one.
    expect(res.body.error.details).toEqual({ run_id: run.id, task_id: run.taskId });
    await eventually(async () => (await runStatus(run.id)) === "completed", { timeoutMs: 30_000 });
  });
});

describe("a widget key revoked while a visitor's answers are open", () => {
  it("ends the stream within about a second", async () => {
    const origin = "https://shop.example";
    const t = await createTenant(prisma);
    const key = await createWidgetKey(prisma, t.agentId, [origin]);
    const stream = watchSse(`${stack.gatewayUrl}/api/v1/widget/run`, { headers: { "x-widget-key": key, origin }, body: { query: LONG } });
    await stream.waitFor((e) => e.type === "text_chunk");
    const revokedAt = Date.now();
    await prisma.widgetKey.update({ where: { key }, data: { revokedAt: new Date() } });
    expect(await within(stream.result, 6000)).not.toBe("timed out");
    expect(Date.now() - revokedAt).toBeLessThan(ENDED_WITHIN_MS);
    expect(stream.events.at(-1).type).toBe("text_chunk");
  });

  it("answers a visitor's JSON request waiting for its run 401 without a bearer challenge, readable by the page, and the run goes on", async () => {
    const origin = "https://shop.example";
    const t = await createTenant(prisma);
    const key = await createWidgetKey(prisma, t.agentId, [origin]);
    const waiting = fetch(`${stack.gatewayUrl}/api/v1/widget/run`, {
      method: "POST",
      headers: { "x-widget-key": key, origin, "content-type": "application/json" },
      body: JSON.stringify({ query: LONG, stream: false }),
      signal: AbortSignal.timeout(20_000),
    });
    const run = await eventually(() => prisma.run.findFirst({ where: { orgId: t.orgId, status: "running" } }));
    await prisma.widgetKey.update({ where: { key }, data: { revokedAt: new Date() } });
    const answer = await waiting;
    const body = (await answer.json()) as any;
    expect({ status: answer.status, code: body.error?.code }).toEqual({ status: 401, code: "unauthorized" });
    expect(answer.headers.get("www-authenticate")).toBeNull();
    expect(answer.headers.get("access-control-allow-origin")).toBe(origin);
    expect(body.error.details).toEqual({ run_id: run.id, task_id: run.taskId });
    await eventually(async () => (await runStatus(run.id)) === "completed", { timeoutMs: 30_000 });
  });
});
