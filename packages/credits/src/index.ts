/**
 * Credits: every change of an organization's balance is one atomic `UPDATE … RETURNING` plus a
 * ledger entry, in the caller's transaction when it has one. A run reserves its base cost when
 * it is accepted (so concurrent runs cannot spend the same credit twice) and settles the rest
 * when it ends.
 */
export { grantCredits, getBalance, reserveRunCredits, settleRunCredits, type SettleInput } from "./credits.service";
export { runCost, parsePricing, type Pricing, type RunUsage, DEFAULT_PRICING } from "./pricing";
