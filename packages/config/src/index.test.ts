import { z } from "zod";
import { ConfigError, dbQueryTimeoutMs, envInteger, internalToken, loadConfig, MAX_TIMER_MS, ownPort, port, redisUrl, timerMs, urlHostFor } from "./index";

describe("port variables", () => {
  const schema = z.object({ PORT: port(3000), OWN_PORT: ownPort });

  it("takes digits from 0 to 65535, around spaces, and the default when unset or empty", () => {
    expect(loadConfig(schema, { PORT: "8080", OWN_PORT: " 0 " })).toEqual({ PORT: 8080, OWN_PORT: 0 });
    expect(loadConfig(schema, { PORT: "65535" }).PORT).toBe(65535);
    expect(loadConfig(schema, {})).toEqual({ PORT: 3000 });
    expect(loadConfig(schema, { PORT: "" }).PORT).toBe(3000);
  });

  it.each(["0x50", "1e3", "80.0", "-1", "65536", "99999999", "http", "80 81"])("refuses %j, naming the variable", (value) => {
    for (const name of ["PORT", "OWN_PORT"]) {
      expect(() => loadConfig(schema, { [name]: value })).toThrow(ConfigError);
      expect(() => loadConfig(schema, { [name]: value })).toThrow(`invalid environment: ${name}: must be a port number, 0 to 65535`);
    }
  });
});

describe("integer variables (durations, counts, sizes)", () => {
  const schema = z.object({ WAIT_MS: timerMs(0).default(1500), COUNT: envInteger(1, 100).default(12), SIZE: envInteger(1).default(1024), DB_QUERY_TIMEOUT_MS: dbQueryTimeoutMs });
  const defaults = { WAIT_MS: 1500, COUNT: 12, SIZE: 1024, DB_QUERY_TIMEOUT_MS: 5000 };

  it("take decimal digits, around spaces, and their defaults when unset or empty", () => {
    expect(loadConfig(schema, {})).toEqual(defaults);
    expect(loadConfig(schema, { WAIT_MS: "", COUNT: "" })).toEqual(defaults);
    expect(loadConfig(schema, { WAIT_MS: " 0 ", COUNT: "100", SIZE: "9007199254740991", DB_QUERY_TIMEOUT_MS: "0600000" })).toEqual({ WAIT_MS: 0, COUNT: 100, SIZE: Number.MAX_SAFE_INTEGER, DB_QUERY_TIMEOUT_MS: 600_000 });
    expect(loadConfig(schema, { WAIT_MS: String(MAX_TIMER_MS) }).WAIT_MS).toBe(MAX_TIMER_MS);
  });

  // `Number` reads these as 16, 5, 7, 1000, 5, 5 and 1000: each would be taken for another value than it shows.
  it.each(["0x10", "0b101", "0o7", "1e3", "5.0", "+5", "1_000", "Infinity", "NaN", "ten", "5 ms", "-1"])("refuse %j, naming the variable and its range", (value) => {
    expect(() => loadConfig(schema, { WAIT_MS: value })).toThrow(ConfigError);
    expect(() => loadConfig(schema, { WAIT_MS: value })).toThrow(/^invalid environment: WAIT_MS: must be a duration in milliseconds, 0 to 2147483647 \(the longest a timer waits\)$/);
    expect(() => loadConfig(schema, { COUNT: value })).toThrow(/^invalid environment: COUNT: must be a whole number, 1 to 100$/);
    expect(() => loadConfig(schema, { SIZE: value })).toThrow(/^invalid environment: SIZE: must be a whole number, 1 or more$/);
    expect(() => loadConfig(schema, { DB_QUERY_TIMEOUT_MS: value })).toThrow(/^invalid environment: DB_QUERY_TIMEOUT_MS: must be a duration in milliseconds, 100 to 600000$/);
  });

  it("refuse a value out of range with the same message, one per variable", () => {
    expect(() => loadConfig(schema, { WAIT_MS: "2147483648", COUNT: "0", SIZE: "9007199254740992", DB_QUERY_TIMEOUT_MS: "99" })).toThrow(
      "invalid environment: WAIT_MS: must be a duration in milliseconds, 0 to 2147483647 (the longest a timer waits); COUNT: must be a whole number, 1 to 100; SIZE: must be a whole number, 1 or more; DB_QUERY_TIMEOUT_MS: must be a duration in milliseconds, 100 to 600000",
    );
  });

  it("bound a duration that is added to before it is timed below MAX_TIMER_MS, saying why", () => {
    const bounded = z.object({ GRACE_MS: timerMs(0, MAX_TIMER_MS - 10_000, "10 s are added to it") });
    expect(loadConfig(bounded, { GRACE_MS: "2147473647" }).GRACE_MS).toBe(2_147_473_647);
    expect(() => loadConfig(bounded, { GRACE_MS: "2147473648" })).toThrow("invalid environment: GRACE_MS: must be a duration in milliseconds, 0 to 2147473647 (10 s are added to it)");
  });
});

describe("INTERNAL_TOKEN", () => {
  const schema = z.object({ INTERNAL_TOKEN: internalToken });

  it("takes a Bearer-safe secret of 16 characters or more", () => {
    expect(loadConfig(schema, { INTERNAL_TOKEN: "Zm9vYmFyYmF6cXV4+/=_-.~0123" }).INTERNAL_TOKEN).toBe("Zm9vYmFyYmF6cXV4+/=_-.~0123");
  });

  it.each(["correct horse battery staple", "a-long-random-value-0123456789\n", "a-long-random-value-\t0123456789", "a-long-random-välue-0123456789"])("refuses %j, which no Bearer header carries as it is", (value) => {
    expect(() => loadConfig(schema, { INTERNAL_TOKEN: value })).toThrow("invalid environment: INTERNAL_TOKEN: must be printable ASCII without spaces or line breaks");
  });
});

describe("urlHostFor", () => {
  it("reaches a service where it listens: the address itself, IPv6 in brackets, loopback for the wildcards", () => {
    expect([undefined, "", " ", "0.0.0.0"].map(urlHostFor)).toEqual(["127.0.0.1", "127.0.0.1", "127.0.0.1", "127.0.0.1"]);
    expect(["::", "[::]"].map(urlHostFor)).toEqual(["[::1]", "[::1]"]);
    expect(["::1", "[::1]", "fd00::7", "127.0.0.2", "10.1.2.3", "memory.internal"].map(urlHostFor)).toEqual(["[::1]", "[::1]", "[fd00::7]", "127.0.0.2", "10.1.2.3", "memory.internal"]);
    expect(new URL(`http://${urlHostFor("fd00::7")}:3002`).hostname).toBe("[fd00::7]");
  });
});

describe("blank values", () => {
  const schema = z.object({ GRACE_MS: timerMs(0).default(30_000), COUNT: envInteger(0).default(12), INTERNAL_TOKEN: internalToken });

  it("are refused, naming each variable the service reads: a blank number was 0", () => {
    for (const blank of [" ", "\t", "\n", "  \r\n"]) {
      expect(() => loadConfig(schema, { GRACE_MS: blank, COUNT: blank })).toThrow(
        "invalid environment: GRACE_MS: is blank (give it a value, or leave it empty for its default); COUNT: is blank (give it a value, or leave it empty for its default)",
      );
    }
    // A secret does not fall back to its published default.
    expect(() => loadConfig(schema, { INTERNAL_TOKEN: " \n" })).toThrow(/INTERNAL_TOKEN/);
    // Reported as blank beside the other bad variables, rather than as a malformed number.
    expect(() => loadConfig(schema, { GRACE_MS: " ", COUNT: "0x10" })).toThrow("invalid environment: GRACE_MS: is blank (give it a value, or leave it empty for its default); COUNT: must be a whole number, 0 or more");
  });

  it("are judged by the variables a schema reads, not by the names its transform gives them", () => {
    const renaming = z.object({ OWN_HOST: z.string().optional(), COUNT: z.coerce.number().default(1) }).transform(({ OWN_HOST, ...rest }) => ({ ...rest, HOST: OWN_HOST }));
    expect(loadConfig(renaming, { HOST: " " })).toEqual({ COUNT: 1, HOST: undefined });
    expect(() => loadConfig(renaming, { COUNT: " " })).toThrow("invalid environment: COUNT: is blank");
  });

  it("are left alone in variables the service does not read; empty ones count as unset", () => {
    expect(loadConfig(schema, { PS2: " ", GRACE_MS: "", COUNT: "" })).toEqual({ GRACE_MS: 30_000, COUNT: 12, INTERNAL_TOKEN: "agentrun-dev-internal-token" });
  });
});

describe("REDIS_URL", () => {
  const schema = z.object({ REDIS_URL: redisUrl });

  it.each(["redis://127.0.0.1:6379", "redis://127.0.0.1:6379/", "redis://127.0.0.1:6379/3", "rediss://:secret@cache.internal:6380/12?family=6"])("takes %j", (value) => {
    expect(loadConfig(schema, { REDIS_URL: value }).REDIS_URL).toBe(value);
  });

  it("refuses what is no URL with one line naming it (and the other bad variables)", () => {
    expect(() => loadConfig(z.object({ REDIS_URL: redisUrl, PORT: port(3000) }), { REDIS_URL: "127.0.0.1:6379", PORT: "x" })).toThrow(/^invalid environment: REDIS_URL: .*PORT: must be a port number/);
  });

  it.each(["redis://127.0.0.1:6379/abc", "redis://127.0.0.1:6379/db1", "redis://127.0.0.1:6379/1/2", "redis://127.0.0.1:6379/-1"])("refuses %j, whose path is no database number", (value) => {
    expect(() => loadConfig(schema, { REDIS_URL: value })).toThrow("invalid environment: REDIS_URL: its path must be a database number");
  });
});
