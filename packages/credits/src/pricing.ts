/** Per-agent pricing; the contract's rule is `1 + tool calls + ceil(total tokens / 1000)`. */
export interface Pricing {
  base: number;
  per_tool_call: number;
  per_1k_tokens: number;
}

export const DEFAULT_PRICING: Pricing = { base: 1, per_tool_call: 1, per_1k_tokens: 1 };

export interface RunUsage {
  /** Tool calls charged: those whose tool ran (not those refused before running). */
  toolCalls: number;
  totalTokens: number;
}

/** Reads an agent's pricing JSON, falling back to the default for any missing or invalid part. */
export function parsePricing(raw: unknown): Pricing {
  const p = (raw && typeof raw === "object" ? raw : {}) as Record<string, unknown>;
  const pick = (k: keyof Pricing) => (Number.isInteger(p[k]) && (p[k] as number) >= 0 ? (p[k] as number) : DEFAULT_PRICING[k]);
  return { base: pick("base"), per_tool_call: pick("per_tool_call"), per_1k_tokens: pick("per_1k_tokens") };
}

/**
 * Credits reserved when a run is accepted: the agent's base price. An agent whose base price is 0
 * but that charges for tool calls or tokens reserves 1 credit all the same (refunded at the end
 * when the run cost nothing), so that its concurrent runs cannot all start on the same credit; only
 * an agent that charges nothing at all reserves nothing.
 */
export function runReservation(raw: unknown): number {
  const p = parsePricing(raw);
  // A run never costs more than MAX_RUN_COST, so it never holds more either (also keeping the
  // hold inside PostgreSQL's integer, whatever base price an agent has stored).
  return Math.min(p.base > 0 || (p.per_tool_call === 0 && p.per_1k_tokens === 0) ? p.base : 1, MAX_RUN_COST);
}

/**
 * Most credits one run can cost. Costs, charges and balances are PostgreSQL `integer`s; with this
 * ceiling one run's figures stay far inside that range whatever pricing an agent has stored.
 */
export const MAX_RUN_COST = 1_000_000_000;

/** Credits a run costs for what it consumed, at most {@link MAX_RUN_COST}. */
export function runCost(usage: RunUsage, pricing: unknown = DEFAULT_PRICING): number {
  const p = parsePricing(pricing);
  // Counts below zero (which no caller should pass) would lower the cost below the base price.
  const cost = p.base + p.per_tool_call * Math.max(0, usage.toolCalls) + p.per_1k_tokens * Math.ceil(Math.max(0, usage.totalTokens) / 1000);
  return Math.min(cost, MAX_RUN_COST);
}
