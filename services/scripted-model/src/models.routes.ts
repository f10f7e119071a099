/** `GET /v1/models` and `GET /v1/models/:id`: the one advertised model, though any name works. */
import { Router } from "express";

/** The id listed by `GET /v1/models`. */
export const MODEL_ID = "scripted";

// A fixed timestamp keeps the listing deterministic.
const CREATED = 1_700_000_000;

function model(id: string) {
  return { id, object: "model", created: CREATED, owned_by: "agentrun" };
}

/** The models routes; `GET /models/:id` answers for any id, as completions accept any model. */
export function modelsRouter(): Router {
  const router = Router();
  router.get("/models", (_req, res) => {
    res.json({ object: "list", data: [model(MODEL_ID)] });
  });
  router.get("/models/:id", (req, res) => {
    res.json(model(req.params.id));
  });
  return router;
}
