import SwaggerParser from "@apidevtools/swagger-parser";
import type { OpenAPIV3_1 } from "openapi-types";
import { buildOpenApiDocument } from "./openapi";
import { memoryCreateSchema } from "./memory";
import { METADATA_MAX_KEYS, runRequestSchema } from "./runs";
import { taskCreateSchema } from "./tasks";

const doc = buildOpenApiDocument() as OpenAPIV3_1.Document;
type Op = OpenAPIV3_1.OperationObject;

const OPERATIONS: [string, string][] = [
  ["/api/run", "post"],
  ["/api/tasks", "get"],
  ["/api/tasks", "post"],
  ["/api/tasks/{task_id}", "get"],
  ["/api/tasks/{task_id}", "delete"],
  ["/api/tasks/{task_id}/runs", "get"],
  ["/api/tasks/{task_id}/runs/{run_id}", "get"],
  ["/api/tasks/{task_id}/runs/{run_id}/events", "get"],
  ["/api/tasks/{task_id}/runs/{run_id}/cancel", "post"],
  ["/api/messages", "get"],
  ["/api/memory", "get"],
  ["/api/memory", "post"],
  ["/api/memory/{memory_id}", "delete"],
];
const op = (path: string, method: string) => (doc.paths?.[path] as Record<string, Op> | undefined)?.[method];

describe("OpenAPI document", () => {
  it("is a valid OpenAPI 3.1 document with resolvable references", async () => {
    expect(doc.openapi).toBe("3.1.0");
    // validate() dereferences in place: give it a copy.
    await expect(SwaggerParser.validate(structuredClone(doc) as never)).resolves.toBeTruthy();
  });

  it.each(OPERATIONS)("documents %s %s with the bearer key, X-Agent-Id and the common errors", (path, method) => {
    const o = op(path, method);
    expect(o).toBeDefined();
    expect(o!.security).toBeUndefined(); // the document's default: bearerAuth
    expect(o!.parameters).toContainEqual({ $ref: "#/components/parameters/AgentId" });
    // 413 and 415 too: a body is checked whatever the method.
    for (const status of ["401", "403", "404", "413", "415", "429", "500", "503"]) expect(o!.responses?.[status]).toBeDefined();
    expect(Object.keys(o!.responses ?? {}).some((s) => s.startsWith("2"))).toBe(true);
  });

  it("declares the bearer security scheme, the error body and the rate-limit headers", () => {
    expect(doc.security).toEqual([{ bearerAuth: [] }]);
    expect(doc.components?.securitySchemes?.bearerAuth).toMatchObject({ type: "http", scheme: "bearer" });
    expect(doc.components?.schemas?.Error).toMatchObject({
      type: "object",
      required: ["error"],
      properties: { error: { type: "object", required: ["code", "message"] } },
    });
    expect(Object.keys(doc.components?.headers ?? {})).toEqual(expect.arrayContaining(["X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "Retry-After", "X-Request-Id"]));
    expect(doc.components?.responses?.TooManyRequests).toMatchObject({ headers: { "Retry-After": { $ref: "#/components/headers/Retry-After" } } });
  });

  it("renders POST /api/run from the request schema, with both response forms and the run-specific errors", () => {
    const run = op("/api/run", "post")!;
    expect((run.requestBody as OpenAPIV3_1.RequestBodyObject).content["application/json"]?.schema).toEqual({ $ref: "#/components/schemas/RunRequest" });
    expect(doc.components?.schemas?.RunRequest).toMatchObject({ required: ["query"], additionalProperties: false, properties: { query: { maxLength: 32_000 }, stream: { default: true } } });
    const ok = run.responses?.["200"] as OpenAPIV3_1.ResponseObject;
    expect(Object.keys(ok.content ?? {})).toEqual(["text/event-stream", "application/json"]);
    // The streams' ping interval, on every answer that may be a stream (the widget's included).
    for (const [path, method] of [["/api/run", "post"], ["/api/tasks/{task_id}/runs/{run_id}/events", "get"], ["/api/v1/widget/run", "post"], ["/api/v1/widget/tasks/{task_id}/runs/{run_id}/events", "get"]] as const) {
      expect((op(path, method)?.responses?.["200"] as OpenAPIV3_1.ResponseObject).headers?.["X-Heartbeat-Interval-Ms"]).toEqual({ $ref: "#/components/headers/X-Heartbeat-Interval-Ms" });
    }
    expect(doc.components?.headers?.["X-Heartbeat-Interval-Ms"]).toMatchObject({ schema: { type: "integer" } });
    for (const status of ["202", "402", "409", "413", "415"]) expect(run.responses?.[status]).toBeDefined();
    const events = JSON.stringify(doc.components?.schemas?.RunEvent);
    for (const type of ["run_started", "text_chunk", "tool_call", "tool_result", "run_completed", "run_failed", "run_cancelled"]) expect(events).toContain(`"${type}"`);
  });

  it("shows integer query parameters as integers with their bounds", () => {
    const limit = (op("/api/tasks", "get")!.parameters as OpenAPIV3_1.ParameterObject[]).find((p) => p.name === "limit");
    expect(limit).toMatchObject({ in: "query", schema: { type: "integer", minimum: 1, maximum: 100 } });
    const offset = (op("/api/tasks", "get")!.parameters as OpenAPIV3_1.ParameterObject[]).find((p) => p.name === "offset");
    expect(offset).toMatchObject({ in: "query", schema: { type: "integer", minimum: 0 } });
    // No bound: any integer is taken (one past every row is an empty page), so none is published
    // that a client validating against the document would hold a valid request to.
    expect(offset!.schema).not.toHaveProperty("maximum");
  });

  it("shows the defaults of the list parameters", () => {
    const param = (path: string, name: string) => (op(path, "get")!.parameters as OpenAPIV3_1.ParameterObject[]).find((p) => p.name === name)!.schema;
    expect(param("/api/tasks", "limit")).toMatchObject({ default: 20 });
    expect(param("/api/tasks", "offset")).toMatchObject({ default: 0 });
    expect(param("/api/messages", "limit")).toMatchObject({ default: 50 });
    expect(param("/api/memory", "limit")).toMatchObject({ default: 20 });
    expect(param("/api/tasks/{task_id}/runs/{run_id}/events", "after")).toMatchObject({ default: 0 });
  });

  it("marks the document's own endpoint, the widget script and the health probes public", () => {
    for (const path of ["/api/openapi.json", "/widget.js", "/widget-demo", "/healthz", "/readyz"]) expect(op(path, "get")!.security).toEqual([]);
    expect(op("/readyz", "get")!.responses?.["503"]).toBeDefined();
  });

  it.each([
    ["/api/v1/widget/run", "post"],
    ["/api/v1/widget/tasks/{task_id}/runs/{run_id}/events", "get"],
  ])("documents the widget gateway's %s %s with the widget key, the visitor token and its errors", (path, method) => {
    const o = op(path, method)!;
    expect(o.security).toEqual([{ widgetKey: [] }]);
    expect((o.parameters ?? []) as OpenAPIV3_1.ParameterObject[]).toContainEqual(expect.objectContaining({ in: "header", name: "X-Visitor-Token" }));
    for (const status of ["401", "403", "429", "503"]) expect(o.responses?.[status]).toBeDefined();
    expect(JSON.stringify(o.responses?.["200"])).toContain("X-Visitor-Token");
  });

  it("documents the widget's cancel: the visitor token required, 202 with the run and the token, the widget's errors and preflight", () => {
    const cancel = op("/api/v1/widget/tasks/{task_id}/runs/{run_id}/cancel", "post")!;
    expect(cancel.security).toEqual([{ widgetKey: [] }]);
    expect((cancel.parameters ?? []) as OpenAPIV3_1.ParameterObject[]).toContainEqual(expect.objectContaining({ in: "header", name: "X-Visitor-Token", required: true }));
    expect(cancel.requestBody).toBeUndefined();
    const accepted = cancel.responses?.["202"] as OpenAPIV3_1.ResponseObject;
    expect(Object.keys(accepted.headers ?? {})).toEqual(expect.arrayContaining(["X-Visitor-Token", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"]));
    const body = accepted.content?.["application/json"]?.schema as OpenAPIV3_1.SchemaObject;
    expect(body.required).toEqual(expect.arrayContaining(["run_id", "task_id", "status", "visitor_token"]));
    for (const status of ["400", "401", "403", "404", "429", "503"]) expect(cancel.responses?.[status]).toBeDefined();
    expect(Object.keys(op("/api/v1/widget/tasks/{task_id}/runs/{run_id}/cancel", "options")?.responses ?? {})).toEqual(["204", "403", "429", "503"]);
    expect(op("/api/v1/widget/tasks/{task_id}/runs/{run_id}/cancel", "options")!.security).toEqual([]);
  });

  it("declares the widget key scheme", () => {
    expect(doc.components?.securitySchemes?.widgetKey).toMatchObject({ type: "apiKey", in: "header", name: "X-Widget-Key" });
  });

  it("documents the widget's preflights and rate-limit headers, and the 409 of deleting a task", () => {
    for (const path of ["/api/v1/widget/run", "/api/v1/widget/tasks/{task_id}/runs/{run_id}/events"]) {
      expect(Object.keys(op(path, "options")?.responses ?? {})).toEqual(["204", "403", "429", "503"]);
    }
    const ok = op("/api/v1/widget/run", "post")?.responses?.["200"] as OpenAPIV3_1.ResponseObject;
    expect(Object.keys(ok.headers ?? {})).toEqual(expect.arrayContaining(["X-Visitor-Token", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"]));
    expect(op("/api/tasks/{task_id}", "delete")?.responses?.["409"]).toEqual({ $ref: "#/components/responses/Conflict" });
  });

  it("declares the Bearer challenge of the API's 401", () => {
    const unauthorized = doc.components?.responses?.Unauthorized as OpenAPIV3_1.ResponseObject;
    expect((unauthorized.headers?.["WWW-Authenticate"] as OpenAPIV3_1.HeaderObject).description).toMatch(/Bearer realm="agentrun".*invalid_request.*invalid_token/);
  });

  it("describes both kinds of 429: the organization's limit with its headers, failed authentications with Retry-After only", () => {
    const tooMany = doc.components?.responses?.TooManyRequests as OpenAPIV3_1.ResponseObject;
    expect(tooMany.description).toMatch(/organization's requests per minute/);
    expect(tooMany.description).toMatch(/failed authentications from the client address/);
    expect(tooMany.headers?.["Retry-After"]).toEqual({ $ref: "#/components/headers/Retry-After" });
    for (const name of ["X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"]) {
      const h = tooMany.headers?.[name] as OpenAPIV3_1.HeaderObject;
      expect({ name, description: h.description }).toEqual({ name, description: expect.stringMatching(/Absent from the 429 for failed authentications/) });
      expect(h.required).not.toBe(true);
    }
  });

  it("gives the widget's 429 the X-RateLimit-* headers of the limit that refused it, except for refused requests", () => {
    const tooMany = doc.components?.responses?.WidgetTooManyRequests as OpenAPIV3_1.ResponseObject;
    expect(tooMany.headers?.["Retry-After"]).toEqual({ $ref: "#/components/headers/Retry-After" });
    for (const name of ["X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"]) {
      const h = tooMany.headers?.[name] as OpenAPIV3_1.HeaderObject;
      expect({ name, description: h?.description }).toEqual({ name, description: expect.stringMatching(/Absent from the 429 for too many refused widget requests/) });
      expect(h.required).not.toBe(true);
    }
  });

  it("answers POST /api/memory with 201 only, a duplicate included", () => {
    const create = op("/api/memory", "post")!;
    expect(Object.keys(create.responses ?? {}).filter((s) => s.startsWith("2"))).toEqual(["201"]);
    expect(create.description).toMatch(/latest write wins/);
  });

  it("states that a duplicate created without a category keeps its stored one", () => {
    const create = op("/api/memory", "post")!;
    expect(create.description).not.toMatch(/general.{0,10} when the request names none/);
    expect(create.description).toMatch(/keeps its stored category when the request names none/);
    expect(create.description).toMatch(/takes the request's category when the request names one/);
  });

  it("states which X-Request-Id values are echoed", () => {
    expect((doc.components?.headers?.["X-Request-Id"] as OpenAPIV3_1.HeaderObject).description).toMatch(/1\.\.200 printable ASCII/);
  });

  it("declares every path parameter of a templated path on each of its operations", () => {
    for (const [path, item] of Object.entries(doc.paths ?? {})) {
      const names = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
      for (const [method, o] of Object.entries(item as Record<string, Op>)) {
        const declared = ((o.parameters ?? []) as OpenAPIV3_1.ParameterObject[]).filter((p) => p.in === "path").map((p) => p.name);
        expect({ path, method, declared: declared.sort() }).toEqual({ path, method, declared: [...names].sort() });
      }
    }
  });

  it("leaves the widget's CORS preflights without credentials, as browsers send them", () => {
    for (const path of ["/api/v1/widget/run", "/api/v1/widget/tasks/{task_id}/runs/{run_id}/events"]) expect(op(path, "options")!.security).toEqual([]);
  });

  it("shows Last-Event-ID as a non-negative integer, and ids as strings answered 404 whatever their form", () => {
    const params = (op("/api/tasks/{task_id}/runs/{run_id}/events", "get")!.parameters ?? []) as OpenAPIV3_1.ParameterObject[];
    expect(params.find((p) => p.name === "Last-Event-ID")).toMatchObject({ in: "header", schema: { type: "integer", minimum: 0 } });
    for (const p of params.filter((x) => x.in === "path")) expect([p.name, (p.schema as OpenAPIV3_1.SchemaObject).pattern]).toEqual([p.name, undefined]);
    expect((doc.components?.parameters?.AgentId as OpenAPIV3_1.ParameterObject).schema).toEqual({ type: "string" });
    // Ids in a body or query are checked for their form (400), unlike those in the path.
    expect((doc.components?.responses?.NotFound as OpenAPIV3_1.ResponseObject).description).toMatch(/id in the path[^]*body or query[^]*400/);
  });

  it("lists has_more and the before cursor of GET /api/memory", () => {
    const params = (op("/api/memory", "get")?.parameters ?? []) as OpenAPIV3_1.ParameterObject[];
    expect(params.map((p) => p.name)).toEqual(expect.arrayContaining(["user_id", "limit", "before"]));
    expect(op("/api/memory", "get")?.description).toMatch(/also once it is deleted/);
    const ok = op("/api/memory", "get")?.responses?.["200"] as OpenAPIV3_1.ResponseObject;
    const body = ok.content?.["application/json"]?.schema as OpenAPIV3_1.SchemaObject;
    expect(body.required).toEqual(expect.arrayContaining(["memories", "has_more"]));
  });

  it("tells stream clients that a stream can end before the terminal event, and how to get the rest", () => {
    for (const [path, method] of [["/api/run", "post"], ["/api/tasks/{task_id}/runs/{run_id}/events", "get"]] as const) {
      const ok = op(path, method)?.responses?.["200"] as OpenAPIV3_1.ResponseObject;
      expect([path, ok.description]).toEqual([path, expect.stringMatching(/can also end before it.*Last-Event-ID/)]);
    }
  });

  it("describes the widget's preflight and Origin as the gateway answers them", () => {
    expect(op("/api/v1/widget/run", "options")?.description).toMatch(/revoked or not/);
    const origin = ((op("/api/v1/widget/run", "post")?.parameters ?? []) as OpenAPIV3_1.ParameterObject[]).find((p) => p.name === "Origin");
    expect(origin).toMatchObject({ in: "header", description: expect.stringMatching(/Sec-Fetch-Site: same-origin/) });
    expect(origin?.required ?? false).toBe(false);
  });

  it("states the limits the server checks beyond lengths: a non-blank trimmed text, at most 50 metadata keys", () => {
    type Schema = OpenAPIV3_1.SchemaObject;
    const schemas = doc.components?.schemas as Record<string, Schema>;
    const taskCreate = (op("/api/tasks", "post")!.requestBody as OpenAPIV3_1.RequestBodyObject).content["application/json"]!.schema as Schema;
    const prop = (name: string, field: string) => (name === "TaskCreate" ? taskCreate : schemas[name]!).properties![field] as Schema;
    const matches = (s: Schema, text: string) => new RegExp(s.pattern!, "u").test(text);
    for (const [field, schema, server] of [
      [prop("MemoryCreate", "content"), memoryCreateSchema, (text: string) => ({ content: text, user_id: "u" })],
      [prop("TaskCreate", "title"), taskCreateSchema, (text: string) => ({ title: text })],
    ] as const) {
      for (const text of [" \t\n ", "\u00a0\u2003\ufeff"]) {
        expect(schema.safeParse(server(text)).success).toBe(false);
        expect(matches(field, text)).toBe(false);
      }
      expect(schema.safeParse(server("  x ")).success).toBe(true);
      expect(matches(field, "  x ")).toBe(true);
    }
    const metadata = (keys: number) => ({ query: "q", context: { metadata: Object.fromEntries(Array.from({ length: keys }, (_, i) => [`k${i}`, i])) } });
    const declared = ((prop("RunRequest", "context") as Schema).properties!.metadata as Schema).maxProperties;
    expect(declared).toBe(METADATA_MAX_KEYS);
    expect(runRequestSchema.safeParse(metadata(declared!)).success).toBe(true);
    expect(runRequestSchema.safeParse(metadata(declared! + 1)).success).toBe(false);
    expect(prop("TaskCreate", "metadata").maxProperties).toBe(METADATA_MAX_KEYS);
  });
});
