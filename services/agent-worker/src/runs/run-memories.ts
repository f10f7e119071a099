import { AppError } from "@agentrun/errors";
import type { Logger } from "@agentrun/logger";
import { memoriesForPrompt, type PromptMemory } from "./prompt";
import type { RunDeps } from "./run-deps";

/**
 * The user's memories for the prompt; when the memory service is down the run goes on without
 * them. A run stopped meanwhile (`signal`) does not wait for them. `log` is the run's logger.
 */
export async function loadMemories(deps: RunDeps, log: Logger, q: { runId: string; orgId: string; agentId: string; userId?: string; query: string }, signal: AbortSignal): Promise<PromptMemory[]> {
  if (!q.userId || deps.config.MEMORY_PROMPT_MAX_COUNT === 0 || deps.config.MEMORY_PROMPT_MAX_CHARS === 0) return [];
  try {
    const res = await deps.memory.context({
      org_id: q.orgId,
      agent_id: q.agentId,
      user_id: q.userId,
      query: q.query,
      max_count: deps.config.MEMORY_PROMPT_MAX_COUNT,
      max_chars: deps.config.MEMORY_PROMPT_MAX_CHARS,
    }, { requestId: q.runId, signal });
    // The client checks the shape; a prompt without memories still beats a failed run.
    return Array.isArray(res?.memories) ? memoriesForPrompt(res.memories, q.userId, deps.config.MEMORY_PROMPT_MAX_COUNT, deps.config.MEMORY_PROMPT_MAX_CHARS) : [];
  } catch (err) {
    if (signal.aborted) return [];
    // Every run goes without memories until the deployment is fixed: said as such, not as an outage.
    if (refusedAccess(err)) log.error({ err, userId: q.userId }, "memories skipped: the memory service refused the worker's INTERNAL_TOKEN, a misconfiguration (it must be the memory service's)");
    else log.warn({ err, userId: q.userId }, "memories skipped: memory service unavailable");
    return [];
  }
}

/** Whether the memory service answered 401 or 403 (the client keeps that status on the error or its cause). */
function refusedAccess(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    const status = e instanceof AppError ? undefined : (e as { status?: unknown }).status;
    if (status === 401 || status === 403) return true;
  }
  return false;
}
