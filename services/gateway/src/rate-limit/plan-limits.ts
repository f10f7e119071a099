import type { Plan } from "@agentrun/db";

/** Requests per minute by plan (the contract's table); enterprise uses the organization's own figure. */
export const PLAN_RPM: Readonly<Record<Exclude<Plan, "enterprise">, number>> = { free: 10, starter: 60, pro: 300 };

/**
 * Requests per minute of an enterprise organization whose row has no `rpm_limit` (the admin CLI
 * always stores one; this covers rows written by other means). Same figure as the CLI's default.
 * @defaultValue 1000
 */
export const ENTERPRISE_FALLBACK_RPM = 1000;

/** The requests-per-minute limit of an organization; `rpmLimit` counts only on the enterprise plan. */
export function rpmLimitOf(plan: Plan, rpmLimit: number | null): number {
  if (plan === "enterprise") return rpmLimit ?? ENTERPRISE_FALLBACK_RPM;
  return PLAN_RPM[plan];
}
