/**
 * `POST /api/run` with a JSON body, answered as one JSON response (`stream: false` unless the body
 * says otherwise). Gives up after `timeoutMs`.
 */
export function postRun(gatewayUrl: string, headers: Record<string, string>, body: Record<string, unknown>, timeoutMs = 20_000): Promise<Response> {
  return fetch(`${gatewayUrl}/api/run`, {
    method: "POST",
    headers: { ...headers, "content-type": "application/json" },
    body: JSON.stringify({ stream: false, ...body }),
    signal: AbortSignal.timeout(timeoutMs),
  });
}

/** {@link postRun}, with the status and the parsed answer (the Run, or an error body). */
export async function runJson(gatewayUrl: string, headers: Record<string, string>, body: Record<string, unknown>, timeoutMs?: number): Promise<{ status: number; body: any }> {
  const res = await postRun(gatewayUrl, headers, body, timeoutMs);
  return { status: res.status, body: await res.json() };
}

/**
 * `method /api<path>` with `headers` (a tenant's), and `body` as JSON when given: the status and
 * the parsed answer (null for an empty one).
 */
export async function apiJson(gatewayUrl: string, method: string, path: string, headers: Record<string, string>, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${gatewayUrl}/api${path}`, {
    method,
    headers: { ...headers, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}
