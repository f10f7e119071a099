import { createMemoryClient, MEMORY_ANSWER_MAX_BYTES } from "./memory-client";
import { callMethod, entry, json, rejection, scope, serve, type Method } from "./memory-client.fixture";

// What the client takes of an answer: no more entries than asked for, no more bytes than any answer may have.
describe("memory client bounds", () => {
  it.each<[Method, number]>([
    ["list", 21],
    ["search", 11],
    ["context", 21],
  ])("maps a %s answer with more entries (%i) than the request's default limit to unavailable", async (method, count) => {
    const url = await serve((req, _body, res) => {
      const one = req.url?.endsWith("/search") ? { ...entry, score: 0.5 } : entry;
      json(res, 200, { memories: Array.from({ length: count }, (_, i) => ({ ...one, memory_id: `mem_${i}` })), has_more: false });
    });
    const err = await rejection(callMethod(method, url));
    expect([err.code, err.status]).toEqual(["unavailable", 503]);
    // As many as asked for is the contract's shape.
    const client = createMemoryClient({ baseUrl: url, token: "t" });
    const asked = { ...scope, user_id: "u1", query: "tea" };
    if (method === "list") expect((await client.list({ ...scope, limit: count })).memories).toHaveLength(count);
    if (method === "search") expect((await client.search({ ...asked, limit: count })).memories).toHaveLength(count);
    if (method === "context") expect((await client.context({ ...asked, max_count: count })).memories).toHaveLength(count);
  });

  it.each([
    ["says its length", true],
    ["is streamed without a length", false],
  ])("gives up reading an answer larger than MEMORY_ANSWER_MAX_BYTES that %s", async (_name, withLength) => {
    let written = 0;
    const url = await serve((_req, _body, res) => {
      const total = MEMORY_ANSWER_MAX_BYTES * 4;
      res.writeHead(200, { "content-type": "application/json", ...(withLength ? { "content-length": total } : {}) });
      const piece = Buffer.alloc(64 * 1024, 0x20);
      const more = () => {
        while (written < total && !res.destroyed) {
          written += piece.length;
          if (!res.write(piece)) return void res.once("drain", more);
        }
        res.end();
      };
      more();
    });
    const err = await rejection(createMemoryClient({ baseUrl: url, token: "t", timeoutMs: 20_000 }).context({ ...scope, user_id: "u1", query: "tea" }));
    expect([err.code, err.status]).toEqual(["unavailable", 503]);
    expect(String((err.cause as Error).message)).toContain(`larger than ${MEMORY_ANSWER_MAX_BYTES} bytes`);
    // It stopped reading: the server could not write the whole body.
    expect(written).toBeLessThan(MEMORY_ANSWER_MAX_BYTES * 4);
  });

});
