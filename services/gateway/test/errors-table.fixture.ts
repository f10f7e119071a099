import type { Stack, Tenant } from "@agentrun/testing";

// What the two files of the contract's error table share: one stack and tenant per file, started
// with these options, requests as that tenant, and the check of the contract's error answer.

/** Options of `stackWithTenant` for the error table: limits that its many requests stay under. */
export const ERRORS_TABLE_STACK = { stack: { workers: 1, gatewayEnv: { AUTH_FAILURE_LIMIT: "100000" } }, tenant: { plan: "enterprise" as const, rpmLimit: 100_000 } };

export interface Call {
  method?: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
}

/** Requests to the gateway of `current()`'s stack, as its tenant unless other headers are given. */
export function requestsOf(current: () => { stack: Stack; tenant: Tenant }) {
  const call = (path: string, { method = "GET", headers = current().tenant.headers, body }: Call = {}) => fetch(`${current().stack.gatewayUrl}${path}`, { method, headers, body });
  const postJson = (path: string, body: unknown, headers = current().tenant.headers) =>
    call(path, { method: "POST", headers: { ...headers, "content-type": "application/json" }, body: JSON.stringify(body) });
  return { call, postJson };
}

/** Asserts the contract's error answer and returns its body. */
export async function expectError(res: Response, status: number, code: string): Promise<any> {
  const text = await res.text();
  expect({ status: res.status, text }).toEqual({ status, text: expect.any(String) });
  expect(res.headers.get("content-type")).toMatch(/^application\/json/);
  expect(res.headers.get("x-request-id")).toMatch(/^\S+$/);
  expect(res.headers.get("x-content-type-options")).toBe("nosniff");
  const body = JSON.parse(text);
  expect(body.error).toMatchObject({ code, message: expect.any(String) });
  expect(Object.keys(body)).toEqual(["error"]);
  for (const k of Object.keys(body.error)) expect(["code", "message", "details"]).toContain(k);
  expect(text).not.toMatch(/\bat .+:\d+:\d+|<html|<!DOCTYPE/i);
  return body;
}
