/**
 * Names for PostgreSQL prepared statements, for the pg driver adapter's
 * `statementNameGenerator`. A named statement is parsed once per connection, and PostgreSQL
 * keeps its plan (it may switch to a generic one after five executions), where an unnamed one is
 * parsed and planned on every execution: for the list statements that is about a third of
 * PostgreSQL's work per request.
 *
 * The same SQL text always gets the same name in a process, so a connection never sees one name
 * for two texts. Only the first `max` distinct texts are named; later ones run unnamed, which
 * bounds what each connection keeps however many query shapes the ORM produces.
 */
export function statementNames(max = 200): (query: { sql: string }) => string {
  const names = new Map<string, string>();
  return ({ sql }) => {
    let name = names.get(sql);
    if (name === undefined) {
      if (names.size >= max) return ""; // pg runs a statement without a name unprepared
      name = `agentrun_${names.size + 1}`;
      names.set(sql, name);
    }
    return name;
  };
}
