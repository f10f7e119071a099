/** OpenAI-style error bodies, so that SDK clients surface them as their usual `APIError`s. */

/** The body OpenAI sends with every non-2xx response. */
export interface OpenAIErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

const KNOWN: Record<number, { type: string; code: string }> = {
  400: { type: "invalid_request_error", code: "invalid_request" },
  401: { type: "authentication_error", code: "invalid_api_key" },
  403: { type: "permission_error", code: "permission_denied" },
  404: { type: "invalid_request_error", code: "not_found" },
  408: { type: "timeout_error", code: "timeout" },
  409: { type: "invalid_request_error", code: "conflict" },
  413: { type: "invalid_request_error", code: "request_too_large" },
  422: { type: "invalid_request_error", code: "unprocessable_entity" },
  429: { type: "rate_limit_error", code: "rate_limit_exceeded" },
  500: { type: "server_error", code: "server_error" },
  502: { type: "server_error", code: "bad_gateway" },
  503: { type: "server_error", code: "service_unavailable" },
  504: { type: "server_error", code: "gateway_timeout" },
};

/** What an error body may say beyond its status's type and code. */
export interface OpenAIErrorExtra {
  /** The request parameter at fault. @defaultValue null */
  param?: string | null;
  /** Replaces the status's code (OpenAI sends `null` on some parameter refusals). */
  code?: string | null;
}

/**
 * Builds the error body for `status`; the type and code follow OpenAI's naming where it has one
 * (e.g. 429 → `rate_limit_error` / `rate_limit_exceeded`), else a generic client or server error.
 */
export function openAIError(status: number, message: string, extra: OpenAIErrorExtra = {}): OpenAIErrorBody {
  const known = KNOWN[status] ?? (status >= 500 ? { type: "server_error", code: "server_error" } : { type: "invalid_request_error", code: `http_${status}` });
  return { error: { message, type: known.type, param: extra.param ?? null, code: extra.code === undefined ? known.code : extra.code } };
}
