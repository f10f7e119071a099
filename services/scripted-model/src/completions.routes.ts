/** `POST /v1/chat/completions`: validates the request, plans the answer and delivers it. */
import { Router, type Request, type Response } from "express";
import { randomUUID } from "node:crypto";
import type { Logger } from "@agentrun/logger";
import { openAIError } from "./errors";
import { chatCompletionRequest, requestConflict } from "./request";
import { completionObject, type CompletionMeta } from "./responses";
import { planResponse } from "./script";
import { sleep, streamCompletion, untilAborted } from "./stream";

/** How many problems of a refused request its 400 names. */
const MAX_LISTED_ISSUES = 5;

/**
 * The chat-completions route. Any `Authorization` header (or none) is accepted; any model name is
 * echoed back.
 */
export function completionsRouter({ logger }: { logger: Logger }): Router {
  const router = Router();

  router.post("/chat/completions", async (req: Request, res: Response) => {
    const parsed = chatCompletionRequest.safeParse(req.body);
    if (!parsed.success) {
      // The first few problems: a body of half a million bad messages must not get a 30 MB answer.
      const { issues } = parsed.error;
      const more = issues.length > MAX_LISTED_ISSUES ? `; … and ${issues.length - MAX_LISTED_ISSUES} more` : "";
      const detail = issues.slice(0, MAX_LISTED_ISSUES).map((i) => `${i.path.join(".") || "body"}: ${i.message}`).join("; ") + more;
      res.status(400).json(openAIError(400, `invalid request: ${detail}`));
      return;
    }
    const body = parsed.data;
    const conflict = requestConflict(body);
    if (conflict) {
      res.status(400).json(openAIError(400, conflict.message, { param: conflict.param, code: null }));
      return;
    }
    const plan = planResponse(body.messages);
    const { directives } = plan;
    const stream = body.stream === true;
    logger.debug(
      { model: body.model, stream, answer: plan.answer.kind, sleepMs: directives.sleepMs, errorStatus: directives.errorStatus, hang: directives.hang },
      "chat completion",
    );

    // Aborts on client disconnect, which cancels pending sleeps and ends a hang.
    const abort = new AbortController();
    res.on("close", () => abort.abort());
    const { signal } = abort;

    const meta: CompletionMeta = { id: `chatcmpl-${randomUUID().replaceAll("-", "")}`, created: Math.floor(Date.now() / 1000), model: body.model };
    const gone = () => logger.debug({ id: meta.id }, "client went away before the answer was complete");

    if (directives.hang) {
      await untilAborted(signal);
      gone();
      return;
    }
    if (directives.errorStatus !== undefined || directives.streamError) {
      if (!(await sleep(directives.sleepMs ?? 0, signal))) return gone();
      const status = directives.errorStatus ?? 500;
      const key = directives.echoKey ? `: Incorrect API key provided: ${req.get("authorization") ?? "(none)"}.` : "";
      const error = openAIError(status, `scripted error ${status}${key}`);
      if (directives.streamError && stream) {
        res.status(200).type("text/event-stream").send(`data: ${JSON.stringify(error)}\n\n`);
        return;
      }
      res.status(status).json(error);
      return;
    }
    if (stream) {
      const complete = await streamCompletion(res, meta, plan, { includeUsage: body.stream_options?.include_usage === true && !directives.noUsage, signal });
      if (!complete) gone();
      return;
    }
    if (!(await sleep(directives.sleepMs ?? 0, signal))) return gone();
    const completion = JSON.stringify(completionObject(meta, plan));
    // `[malformed]` without streaming: a truncated JSON body under a JSON content type.
    res.status(200).type("application/json").send(directives.malformed ? completion.slice(0, Math.ceil(completion.length / 2)) : completion);
  });

  return router;
}
