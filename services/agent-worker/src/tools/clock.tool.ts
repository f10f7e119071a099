import { z } from "zod";
import { defineAction, ToolError } from "./tool";

export const clockNow = defineAction({
  tool: "clock",
  action: "now",
  description: "Returns the current date and time, in UTC and optionally in an IANA time zone such as 'Europe/Paris'.",
  params: z.strictObject({ timezone: z.string().max(64).optional().describe("IANA time zone name") }),
  async run({ timezone }) {
    const now = new Date();
    const out: Record<string, unknown> = { iso: now.toISOString(), unix_ms: now.getTime() };
    if (timezone) {
      try {
        out.timezone = timezone;
        out.local = new Intl.DateTimeFormat("en-GB", { timeZone: timezone, dateStyle: "full", timeStyle: "long" }).format(now);
      } catch {
        throw new ToolError("invalid_timezone", `Unknown time zone '${timezone}'.`);
      }
    }
    return out;
  },
});
