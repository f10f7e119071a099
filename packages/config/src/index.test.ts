import { z } from "zod";
import { ConfigError, internalToken, loadConfig, ownPort, port, urlHostFor } from "./index";

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
