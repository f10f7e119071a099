import { z } from "zod";
import { MEMORY_CATEGORIES, memoryContentSchema } from "@agentrun/contracts";
import { defineAction, ToolError, type ToolContext } from "./tool";

function userOf(ctx: ToolContext): string {
  // Refused before the memory service is asked: not charged.
  if (!ctx.userId) throw new ToolError("no_user", "Memory needs the run's context.user_id; none was given.", { charged: false });
  return ctx.userId;
}

export const memorySave = defineAction({
  tool: "memory",
  action: "save",
  description: "Saves a fact, preference or instruction about the current user for future conversations.",
  params: z.strictObject({
    // Trimmed first, as the memory service does, so blank content never leaves the worker.
    content: memoryContentSchema.describe("What to remember, as a short sentence"),
    category: z.enum(MEMORY_CATEGORIES).optional().describe("general, preference, fact or instruction"),
  }),
  async run({ content, category }, ctx) {
    const res = await ctx.memory.create({ org_id: ctx.orgId, agent_id: ctx.agentId, user_id: userOf(ctx), content, category }, { signal: ctx.signal, requestId: ctx.runId });
    return { saved: true, memory_id: res.memory.memory_id, duplicate: !res.created };
  },
});

export const memorySearch = defineAction({
  tool: "memory",
  action: "search",
  description: "Searches what is remembered about the current user, most relevant first.",
  params: z.strictObject({
    query: z.string().min(1).max(1000).describe("What to look for"),
    limit: z.number().int().min(1).max(20).optional(),
  }),
  async run({ query, limit }, ctx) {
    const res = await ctx.memory.search({ org_id: ctx.orgId, agent_id: ctx.agentId, user_id: userOf(ctx), query, limit: limit ?? 5 }, { signal: ctx.signal, requestId: ctx.runId });
    return { memories: res.memories.map((m) => ({ content: m.content, category: m.category, created_at: m.created_at })) };
  },
});
