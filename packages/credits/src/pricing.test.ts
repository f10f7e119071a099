import { MAX_RUN_COST, runCost, runReservation } from "./pricing";

describe("runCost", () => {
  it("charges 1 + tool calls + started thousands of tokens by default", () => {
    expect(runCost({ toolCalls: 2, totalTokens: 1001 })).toBe(5);
    expect(runCost({ toolCalls: 0, totalTokens: 0 })).toBe(1);
  });

  it("applies an agent's pricing", () => {
    expect(runCost({ toolCalls: 3, totalTokens: 2500 }, { base: 10, per_tool_call: 0, per_1k_tokens: 7 })).toBe(31);
  });

  it("leaves a cost at the ceiling as it is", () => {
    expect(MAX_RUN_COST).toBe(1_000_000_000);
    expect(runCost({ toolCalls: 999, totalTokens: 0 }, { base: 1_000_000, per_tool_call: 1_000_000, per_1k_tokens: 0 })).toBe(MAX_RUN_COST);
  });

  it.each([
    [{ toolCalls: 1000, totalTokens: 0 }, { base: 1_000_000, per_tool_call: 1_000_000, per_1k_tokens: 0 }],
    [{ toolCalls: 0, totalTokens: 10_000 }, { base: 1, per_tool_call: 1, per_1k_tokens: 2_147_483_647 }],
    [{ toolCalls: 50, totalTokens: 5_000_000 }, { base: 2_147_483_647, per_tool_call: 2_147_483_647, per_1k_tokens: 2_147_483_647 }],
  ])("caps the cost of %j under %j at 1,000,000,000 credits", (usage, pricing) => {
    expect(runCost(usage, pricing)).toBe(1_000_000_000);
  });

  it("never costs less than the base price, whatever counts it is given", () => {
    expect(runCost({ toolCalls: -5, totalTokens: -10_000 })).toBe(1);
    expect(runCost({ toolCalls: 0, totalTokens: -10_000 }, { base: 3, per_tool_call: 1, per_1k_tokens: 1 })).toBe(3);
  });
});

describe("runReservation", () => {
  it("reserves the base price, 1 by default", () => {
    expect(runReservation(undefined)).toBe(1);
    expect(runReservation({ base: 10, per_tool_call: 1, per_1k_tokens: 1 })).toBe(10);
  });

  it("reserves 1 credit for an agent with base price 0 that charges for tool calls or tokens", () => {
    expect(runReservation({ base: 0, per_tool_call: 0, per_1k_tokens: 1 })).toBe(1);
    expect(runReservation({ base: 0, per_tool_call: 5, per_1k_tokens: 0 })).toBe(1);
  });

  it("reserves nothing for an agent that charges nothing", () => {
    expect(runReservation({ base: 0, per_tool_call: 0, per_1k_tokens: 0 })).toBe(0);
  });

  it("holds no more than a run can cost, whatever base price is stored", () => {
    expect(runReservation({ base: 3_000_000_000, per_tool_call: 0, per_1k_tokens: 0 })).toBe(MAX_RUN_COST);
    expect(runReservation({ base: MAX_RUN_COST + 1, per_tool_call: 1, per_1k_tokens: 1 })).toBe(MAX_RUN_COST);
  });
});
