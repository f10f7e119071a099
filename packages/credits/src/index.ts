/**
 * Credits: every change of an organization's balance is one atomic `UPDATE … RETURNING` plus a
 * ledger entry. A run reserves its base cost when it is accepted (so concurrent runs cannot spend
 * the same credit twice; the `agentrun_create_run` SQL function) and settles the rest when it
 * ends (`agentrun_finish_run`); grants and the cost rule live here.
 */
export { grantCredits, grantCreditsInTransaction, getBalance } from "./credits.service";
export { runCost, runReservation, parsePricing, type Pricing, type RunUsage, DEFAULT_PRICING, MAX_RUN_COST } from "./pricing";
