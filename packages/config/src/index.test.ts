import { z } from "zod";
import { ConfigError, loadConfig, ownPort, port } from "./index";

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
