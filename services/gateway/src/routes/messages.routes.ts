import { Router } from "express";
import { messageListQuerySchema } from "@agentrun/contracts";
import { AppError } from "@agentrun/errors";
import type { GatewayDeps } from "../deps";
import { authOf } from "../request-context";
import { ownedTask } from "../tasks/task-access";
import { toMessageView } from "../views/task.view";

/** `GET /messages`: a task's history, oldest first, paged backwards with `before`. */
export function messagesRoutes(deps: GatewayDeps): Router {
  const router = Router();
  const { prisma } = deps;

  router.get("/messages", async (req, res) => {
    const q = messageListQuerySchema.parse(req.query);
    const task = await ownedTask(prisma, authOf(req), q.task_id);
    let cursor: { createdAt: Date; id: string } | undefined;
    if (q.before) {
      const m = await prisma.message.findUnique({ where: { id: q.before }, select: { taskId: true, createdAt: true, id: true } });
      if (!m || m.taskId !== task.id) throw new AppError("invalid_request", { message: `'before' names no message of task '${task.id}'.` });
      cursor = m;
    }
    // The newest `limit` messages before the cursor (one more tells whether older ones exist),
    // on the (task_id, created_at, id) index; then oldest first.
    const rows = await prisma.message.findMany({
      where: {
        taskId: task.id,
        ...(cursor ? { OR: [{ createdAt: { lt: cursor.createdAt } }, { createdAt: cursor.createdAt, id: { lt: cursor.id } }] } : {}),
      },
      orderBy: [{ createdAt: "desc" }, { id: "desc" }],
      take: q.limit + 1,
    });
    const hasMore = rows.length > q.limit;
    res.json({ messages: rows.slice(0, q.limit).reverse().map(toMessageView), has_more: hasMore });
  });

  return router;
}
