import type { ChatMessage } from "./request";
import { planResponse } from "./script";

const user = (content: ChatMessage["content"]): ChatMessage => ({ role: "user", content });

describe("planResponse", () => {
  it("echoes the last user message without its directives, with usage from chars / 4", () => {
    const plan = planResponse([{ role: "system", content: "be nice" }, user("first"), user("[chunks:3]  hi there ")]);
    expect(plan.answer).toEqual({ kind: "text", text: "Echo: hi there" });
    // prompt: 7 + 5 + 21 = 33 chars → 9; completion: 14 chars → 4
    expect(plan.usage).toEqual({ prompt_tokens: 9, completion_tokens: 4, total_tokens: 13 });
  });

  it("echoes the empty string when only non-text directives were given", () => {
    expect(planResponse([user("[sleep:5]")]).answer).toEqual({ kind: "text", text: "Echo: " });
  });

  it("reads text parts of array content", () => {
    const plan = planResponse([user([{ type: "text", text: "hel" }, { type: "image_url" }, { type: "text", text: "lo" }])]);
    expect(plan.answer).toEqual({ kind: "text", text: "Echo: hello" });
  });

  it("answers [echo-system] and [history] in the order written", () => {
    const plan = planResponse([
      { role: "system", content: "one" },
      user("a"),
      { role: "assistant", content: "Echo: a" },
      { role: "system", content: [{ type: "text", text: "two" }] },
      user("b"),
      user("[history] [echo-system] ignored"),
    ]);
    expect(plan.answer).toEqual({ kind: "text", text: "a | b\none\ntwo" });
  });

  it("requests the tool calls, numbering ids after earlier calls in the conversation", () => {
    const plan = planResponse([
      user("x"),
      { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "old", arguments: "{}" } }] },
      { role: "tool", tool_call_id: "call_1", content: "1" },
      user('[call:a {"x":1}][call:b]'),
    ]);
    expect(plan.answer).toEqual({
      kind: "tool_calls",
      calls: [
        { id: "call_2", name: "a", arguments: '{"x":1}' },
        { id: "call_3", name: "b", arguments: "{}" },
      ],
    });
    // a + {"x":1} + b + {} = 1 + 7 + 1 + 2 = 11 chars → 3 tokens
    expect(plan.usage.completion_tokens).toBe(3);
  });

  it("puts the message's text before the tool calls with [preface], counting it in the usage", () => {
    const plan = planResponse([user("[preface][call:clock_now] Let me check. ")]);
    expect(plan.answer).toEqual({ kind: "tool_calls", calls: [{ id: "call_1", name: "clock_now", arguments: "{}" }], text: "Let me check." });
    // Let me check. (13) + clock_now (9) + {} (2) = 24 chars → 6 tokens
    expect(plan.usage.completion_tokens).toBe(6);
    // Without text there is no preface; without [preface] the text is not sent with the calls.
    expect(planResponse([user("[preface][call:clock_now]")]).answer).not.toHaveProperty("text");
    expect(planResponse([user("[call:clock_now] Let me check.")]).answer).not.toHaveProperty("text");
  });

  it("reports each tool result after the calls came back, names taken from the assistant's tool calls", () => {
    const plan = planResponse([
      user("[call:a][call:b]"),
      {
        role: "assistant",
        content: null,
        tool_calls: [
          { id: "call_1", type: "function", function: { name: "a", arguments: "{}" } },
          { id: "call_2", type: "function", function: { name: "renamed", arguments: "{}" } },
        ],
      },
      { role: "tool", tool_call_id: "call_1", content: '{"v":1}' },
      { role: "tool", tool_call_id: "call_2", content: [{ type: "text", text: "2" }] },
    ]);
    expect(plan.answer).toEqual({ kind: "text", text: 'Tool a returned: {"v":1}\nTool renamed returned: 2' });
  });

  it("forces usage with [usage:N]", () => {
    expect(planResponse([user("[usage:1234] long text")]).usage).toEqual({ prompt_tokens: 0, completion_tokens: 1234, total_tokens: 1234 });
  });

  it("echoes the empty string when there is no user message", () => {
    expect(planResponse([{ role: "system", content: "s" }]).answer).toEqual({ kind: "text", text: "Echo: " });
  });
});
