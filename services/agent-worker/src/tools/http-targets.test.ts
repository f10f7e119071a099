import { addressAllowed, hostAllowed } from "./http.tool";

// What http_get may reach: the agent's allowlist of hosts, then public addresses only (unless
// private ones are allowed), whatever spelling or encapsulation an address comes in.
describe("hostAllowed", () => {
  it("matches exact names, ignoring case and a trailing dot", () => {
    expect(hostAllowed("api.example.com", ["api.example.com"])).toBe(true);
    expect(hostAllowed("API.Example.COM.", ["api.example.com"])).toBe(true);
    expect(hostAllowed("api.example.com", [" API.example.com "])).toBe(true);
    expect(hostAllowed("example.com", ["api.example.com"])).toBe(false);
    expect(hostAllowed("api.example.com.evil.net", ["api.example.com"])).toBe(false);
    expect(hostAllowed("api.example.com", [])).toBe(false);
  });

  it("matches IPv6 literals with or without brackets, in any spelling", () => {
    expect(hostAllowed("[2001:db8::1]", ["2001:db8::1"])).toBe(true);
    expect(hostAllowed("[2001:db8::1]", ["[2001:DB8:0::1]"])).toBe(true);
    expect(hostAllowed("[2001:db8::2]", ["2001:db8::1"])).toBe(false);
    expect(hostAllowed("[::1]", ["::1"])).toBe(true);
    expect(hostAllowed("127.0.0.1", ["127.0.0.1"])).toBe(true);
  });

  it("matches subdomains at any depth for a `*.` entry, but not the bare domain or look-alikes", () => {
    const list = ["*.example.com"];
    expect(hostAllowed("api.example.com", list)).toBe(true);
    expect(hostAllowed("a.b.example.com", list)).toBe(true);
    expect(hostAllowed("example.com", list)).toBe(false);
    expect(hostAllowed("badexample.com", list)).toBe(false);
    expect(hostAllowed("example.com.evil.net", list)).toBe(false);
  });

  it("matches any entry of the list", () => {
    expect(hostAllowed("127.0.0.1", ["example.com", "127.0.0.1"])).toBe(true);
  });
});

describe("addressAllowed", () => {
  it.each([
    "127.0.0.1",
    "127.1.2.3",
    "10.0.0.1",
    "10.255.255.254",
    "172.16.0.1",
    "192.168.1.1",
    "169.254.169.254",
    "100.64.0.1",
    "0.0.0.0",
    "224.0.0.1",
    "255.255.255.255",
    "::1",
    "::",
    "::ffff:127.0.0.1",
    "::ffff:10.0.0.1",
    "fc00::1",
    "fe80::1",
    "64:ff9b::7f00:1",
    "64:ff9b::a00:1",
    "64:ff9b::a9fe:a9fe",
    "64:ff9b:1::808:808",
    "2002:7f00:1::1",
    "::7f00:1",
    "::a9fe:a9fe",
    "::10.0.0.1",
  ])("rejects the non-public address %s", (address) => {
    expect(addressAllowed(address, false)).toBe(false);
  });

  // 64:ff9b::808:808 is 8.8.8.8 through NAT64 (what DNS64 answers on an IPv6-only network).
  it.each(["8.8.8.8", "1.1.1.1", "::ffff:8.8.8.8", "2001:4860:4860::8888", "64:ff9b::808:808", "64:ff9b::5db8:d822"])("accepts the public address %s", (address) => {
    expect(addressAllowed(address, false)).toBe(true);
  });

  it("accepts private addresses when allowPrivate is set", () => {
    for (const address of ["127.0.0.1", "10.0.0.1", "192.168.1.1", "169.254.169.254", "::1", "8.8.8.8"]) expect(addressAllowed(address, true)).toBe(true);
  });
});
