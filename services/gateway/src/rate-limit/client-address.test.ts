import { clientAddressKey } from "./client-address";

describe("clientAddressKey", () => {
  it("keeps an IPv4 address", () => {
    expect(clientAddressKey("203.0.113.7")).toBe("203.0.113.7");
  });

  it("maps an IPv4-mapped IPv6 address to its IPv4 address", () => {
    expect(clientAddressKey("::ffff:203.0.113.7")).toBe("203.0.113.7");
    expect(clientAddressKey("::FFFF:cb00:7107")).toBe("203.0.113.7");
  });

  it("counts an IPv6 address as its /64, however it is written", () => {
    const key = "2001:db8:1:2::/64";
    for (const ip of ["2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:0DB8:0001:0002:a:b:c:d", "2001:db8:1:2:0:0:0:9"]) expect(clientAddressKey(ip)).toBe(key);
    expect(clientAddressKey("2001:db8:1:3::1")).toBe("2001:db8:1:3::/64");
    expect(clientAddressKey("::1")).toBe("::/64");
    expect(clientAddressKey("fe80::1%eth0")).toBe("fe80::/64");
  });

  it("puts what is not an IP address in one bucket", () => {
    for (const ip of [undefined, "", "unknown", "203.0.113.256", "2001:db8::1::2", "x".repeat(300)]) expect(clientAddressKey(ip)).toBe("unknown");
  });
});
