import { z } from "zod";
import { ConfigError, internalToken, loadConfig, ownPort, port, redisUrl, timerMs, urlHostFor } from "./index";

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
  const schema = z.object({ GRACE_MS: timerMs(0).default(30_000), COUNT: z.coerce.number().int().min(0).default(12), INTERNAL_TOKEN: internalToken });

  it("are refused, naming each variable the service reads: a blank number was 0", () => {
    for (const blank of [" ", "\t", "\n", "  \r\n"]) {
      expect(() => loadConfig(schema, { GRACE_MS: blank, COUNT: blank })).toThrow(
        "invalid environment: GRACE_MS: is blank (give it a value, or leave it empty for its default); COUNT: is blank (give it a value, or leave it empty for its default)",
      );
    }
    // A secret does not fall back to its published default.
    expect(() => loadConfig(schema, { INTERNAL_TOKEN: " \n" })).toThrow(/INTERNAL_TOKEN/);
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
