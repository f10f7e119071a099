import { Router, type Request } from "express";
import { idParam, memoryCreateSchema, memoryListQuerySchema, type MemoryScope } from "@agentrun/contracts";
import { AppError } from "@agentrun/errors";
import type { GatewayDeps } from "../deps";
import { authOf } from "../request-context";
import { toMemoryEntryView } from "../views/memory.view";
import { readsNoQuery, takesNoBody } from "../middleware/strict-query";

/** The memory scope of the caller: its organization and the agent named by X-Agent-Id. */
function scopeOf(req: Request): MemoryScope {
  const auth = authOf(req);
  return { org_id: auth.orgId, agent_id: auth.agentId };
}

/**
 * The public memory API, a thin layer over the memory service's internal API (`deps.memory`).
 * Every entry is scoped to the caller's organization and agent; the memory service decides
 * 404 `memory_not_found` and 403 `forbidden`, and the client turns an unreachable, slow or
 * failing service into 503 `unavailable` within its timeout.
 */
export function memoryRoutes(deps: GatewayDeps, router: Router = Router()): Router {

  /**
   * `GET /memory?user_id=&limit=&before=`: newest first, every user of the agent when user_id is
   * absent; `has_more` when older entries follow (`before` = the last entry's id pages back).
   */
  router.get("/memory", async (req, res) => {
    takesNoBody(req);
    const scope = scopeOf(req);
    const query = memoryListQuerySchema.parse(req.query);
    const { memories, has_more } = await deps.memory.list({ ...scope, user_id: query.user_id, limit: query.limit, before: query.before }, { requestId: req.id });
    res.json({ memories: memories.map(toMemoryEntryView), has_more });
  });

  /**
   * `POST /memory`: 201 with the entry, as the contract says. A user's memories are deduplicated
   * on their trimmed content, so an exact duplicate adds no second entry: the existing one is
   * answered, with the request's category (the latest write wins), and retrying a create is safe.
   */
  router.post("/memory", async (req, res) => {
    readsNoQuery(req);
    const scope = scopeOf(req);
    const body = memoryCreateSchema.parse(req.body ?? {});
    const { memory } = await deps.memory.create({ ...scope, ...body }, { requestId: req.id });
    res.status(201).json(toMemoryEntryView(memory));
  });

  /** `DELETE /memory/:memory_id`: 204; 404 when no entry has the id, 403 when another org's or agent's. */
  router.delete("/memory/:memory_id", async (req, res) => {
    readsNoQuery(req);
    takesNoBody(req);
    const scope = scopeOf(req);
    const id = req.params.memory_id;
    // An id no entry can have is not found, without a call to the memory service.
    if (!idParam.safeParse(id).success) throw new AppError("memory_not_found");
    await deps.memory.remove(scope, id, { requestId: req.id });
    res.status(204).end();
  });

  return router;
}
