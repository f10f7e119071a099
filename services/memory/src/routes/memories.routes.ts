import { Router } from "express";
import { z } from "zod";
import {
  idParam,
  internalMemoryContextSchema,
  internalMemoryCreateSchema,
  internalMemorySearchSchema,
  memoryListQuerySchema,
  memoryScopeSchema,
} from "@agentrun/contracts";
import { AppError } from "@agentrun/errors";
import { createMemory, deleteMemory, getMemory, listMemories, type MemoryServiceDeps } from "../memory.service";
import { memoryContext, searchMemories } from "../memory-search.service";

/**
 * Query of `GET /internal/memories`: the scope plus the public list query (user_id?, limit,
 * before). Strict, as the public list is: a parameter it does not read (`?x=1`, `?limit[]=1`) is
 * 400 `invalid_request` naming it, so that a caller's misspelled filter is never silently ignored.
 */
const internalMemoryListQuerySchema = z.strictObject({ ...memoryScopeSchema.shape, ...memoryListQuerySchema.shape });

/** A path id that cannot name an entry is simply not found. */
function memoryId(raw: string): string {
  if (!idParam.safeParse(raw).success) throw new AppError("memory_not_found");
  return raw;
}

/** The internal memory API, mounted at `/internal/memories` behind the internal-token check. */
export function memoriesRouter(deps: MemoryServiceDeps): Router {
  const router = Router();

  router.post("/", async (req, res) => {
    const input = internalMemoryCreateSchema.parse(req.body);
    const result = await createMemory(deps, input);
    res.status(result.created ? 201 : 200).json(result);
  });

  router.get("/", async (req, res) => {
    const query = internalMemoryListQuerySchema.parse(req.query);
    res.json(await listMemories(deps, query));
  });

  router.post("/search", async (req, res) => {
    const input = internalMemorySearchSchema.parse(req.body);
    res.json({ memories: await searchMemories(deps, input) });
  });

  router.post("/context", async (req, res) => {
    const input = internalMemoryContextSchema.parse(req.body);
    // The caller (a run's worker or the gateway) gives up at its timeout: stop reading then.
    const gone = new AbortController();
    res.once("close", () => gone.abort());
    const memories = await memoryContext(deps, input, gone.signal);
    if (!gone.signal.aborted) res.json({ memories });
  });

  router.get("/:id", async (req, res) => {
    const scope = memoryScopeSchema.parse(req.query);
    res.json({ memory: await getMemory(deps, scope, memoryId(req.params.id)) });
  });

  router.delete("/:id", async (req, res) => {
    const scope = memoryScopeSchema.parse(req.query);
    await deleteMemory(deps, scope, memoryId(req.params.id));
    res.status(204).end();
  });

  return router;
}
