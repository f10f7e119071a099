import { Router } from "express";
import { messageListQuerySchema } from "@agentrun/contracts";
import type { GatewayDeps } from "../deps";
import { takesNoBody } from "../middleware/strict-query";
import { authOf } from "../request-context";
import { messageListBody } from "../views/list-queries";
import { paceAnswer } from "../runs/stalled-client";

/** `GET /messages`: a task's history, oldest first, paged backwards with `before`. */
export function messagesRoutes(deps: GatewayDeps, router: Router = Router()): Router {

  router.get("/messages", async (req, res) => {
    // A page can pass 8 MB (PAGE_MAX_BYTES: it ends after the row that passes it).
    paceAnswer(req, res);
    takesNoBody(req);
    const q = messageListQuerySchema.parse(req.query);
    res.type("application/json").send(await messageListBody(deps.prisma, authOf(req), q));
  });

  return router;
}
