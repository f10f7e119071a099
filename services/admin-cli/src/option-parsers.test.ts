import { UsageError } from "./cli-errors";
import { hostListOption, intOption, numberOption, parseOrigin, splitList } from "./option-parsers";

describe("intOption", () => {
  const credits = intOption("--credits", 0);
  it("accepts whole numbers in range", () => {
    expect(credits("0")).toBe(0);
    expect(credits(" 42 ")).toBe(42);
    expect(credits("2147483647")).toBe(2_147_483_647);
  });
  it.each(["", "1.5", "1e3", "0x10", "10abc", "-1", "2147483648"])("rejects %j", (v) => {
    expect(() => credits(v)).toThrow(new UsageError("--credits must be an integer from 0 to 2147483647"));
  });
  it("names the range in its message, the upper limit included", () => {
    expect(() => credits("99999999999")).toThrow(new UsageError("--credits must be an integer from 0 to 2147483647"));
    expect(() => intOption("--amount", 1)("0")).toThrow("--amount must be an integer from 1 to 2147483647");
    expect(() => intOption("--max-steps", 1, 50)("51")).toThrow("--max-steps must be an integer from 1 to 50");
  });
});

describe("numberOption", () => {
  const t = numberOption("--temperature", 0, 2);
  it.each([["0", 0], ["0.7", 0.7], [".5", 0.5], ["2", 2]])("%s → %d", (v, n) => expect(t(v)).toBe(n));
  it.each(["", "abc", "2.1", "-0.1", "1e0", "Infinity"])("rejects %j", (v) => expect(() => t(v)).toThrow(UsageError));
});

describe("parseOrigin", () => {
  it.each([
    ["https://a.example", "https://a.example"],
    ["https://A.Example/", "https://a.example"],
    ["http://localhost:5173", "http://localhost:5173"],
    ["https://a.example:443", "https://a.example"],
    ["http://127.0.0.1:8080", "http://127.0.0.1:8080"],
    ["http://[::1]:3000", "http://[::1]:3000"],
    ["https://bücher.example", "https://xn--bcher-kva.example"],
  ])("%s → %s", (input, origin) => expect(parseOrigin("--origins", input)).toBe(origin));

  it.each(["a.example", "https://a.example/x", "https://a.example?", "https://a.example#", "ws://a.example", "https://u@a.example", "null", "*", "https://*.example.com", "https://a*.example", "https://a!.example"])(
    "rejects %j",
    (input) => expect(() => parseOrigin("--origins", input)).toThrow(UsageError),
  );
});

describe("lists", () => {
  it("splits, trims and de-duplicates", () => expect(splitList(" a, b,,a ,")).toEqual(["a", "b"]));
  it("accepts host names and subdomain wildcards without ports", () => {
    const hosts = hostListOption("--http-allow");
    expect(hosts("API.example.com, *.foo.io,10.0.0.1")).toEqual(["api.example.com", "*.foo.io", "10.0.0.1"]);
    expect(() => hosts("a.example:8080")).toThrow(UsageError);
    expect(() => hosts("a.*.example")).toThrow(UsageError);
  });
  it("accepts IPv6 addresses, with or without brackets, as a URL writes them", () => {
    const hosts = hostListOption("--http-allow");
    expect(hosts("::1,[FD00:0::2],2001:db8::1")).toEqual(["[::1]", "[fd00::2]", "[2001:db8::1]"]);
    expect(() => hosts("[::1]:8080")).toThrow(UsageError);
    expect(() => hosts("fd00::2::3")).toThrow(UsageError);
  });
});
