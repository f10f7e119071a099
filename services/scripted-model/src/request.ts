/**
 * The subset of the OpenAI chat-completions request the scripted model reads. Unknown fields are
 * accepted and ignored, as a real provider would for parameters it does not support.
 */
import { z } from "zod";

const contentPart = z.looseObject({ type: z.string(), text: z.string().optional() });

/** Message content: a string, text parts (other part types are ignored), or null. */
export const messageContent = z.union([z.string(), z.array(contentPart), z.null()]).optional();

/** Whether `text` parses as JSON. */
function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

const toolCall = z.looseObject({
  id: z.string(),
  type: z.string().optional(),
  // Absent on non-function (custom) tool calls, which are carried along but never read. Arguments
  // that are not JSON are refused, as strict providers (vLLM, some proxies) refuse them.
  function: z.looseObject({ name: z.string(), arguments: z.string().refine(isJson, "must be JSON") }).optional(),
});

export const chatMessage = z.looseObject({
  role: z.enum(["system", "developer", "user", "assistant", "tool", "function"]),
  content: messageContent,
  tool_calls: z.array(toolCall).nullish(),
  tool_call_id: z.string().optional(),
});

export const chatCompletionRequest = z.looseObject({
  model: z.string().min(1),
  messages: z.array(chatMessage).min(1),
  stream: z.boolean().nullish(),
  stream_options: z.looseObject({ include_usage: z.boolean().optional() }).nullish(),
});

/**
 * The refusal OpenAI gives a well-formed request whose parameters contradict each other, or null
 * when they agree: `stream_options` (unless null) goes only with `stream: true`.
 */
export function requestConflict(body: ChatCompletionRequest): { param: string; message: string } | null {
  if (body.stream_options != null && body.stream !== true) return { param: "stream_options", message: "The 'stream_options' parameter is only allowed when 'stream' is enabled." };
  return null;
}

export type ChatMessage = z.infer<typeof chatMessage>;
export type ChatCompletionRequest = z.infer<typeof chatCompletionRequest>;

/** The text of a message's content: the string itself, or its text parts concatenated. */
export function contentText(content: ChatMessage["content"]): string {
  if (typeof content === "string") return content;
  if (!content) return "";
  return content.map((part) => (part.type === "text" && typeof part.text === "string" ? part.text : "")).join("");
}
