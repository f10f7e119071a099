/**
 * `databaseUrl` with `-c name=value` settings added to its `options` parameter (the command-line
 * options PostgreSQL applies to the session when it starts), after any options the URL already
 * has, so that these are the ones in force. Sent in the connection's startup message, they hold
 * from its first statement; PgBouncer (1.20 on) passes on those it tracks, TimeZone among them.
 */
export function withSessionSettings(databaseUrl: string, settings: Record<string, string | number>): string {
  const url = new URL(databaseUrl);
  const added = Object.entries(settings).map(([name, value]) => `-c ${name}=${value}`);
  const options = [url.searchParams.get("options"), ...added].filter((o) => o !== null && o.trim() !== "");
  url.searchParams.set("options", options.join(" "));
  return url.toString();
}
