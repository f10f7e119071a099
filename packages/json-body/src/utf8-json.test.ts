import { AppError } from "@agentrun/errors";
import { foreignCharset, parseUtf8Json } from "./utf8-json";

describe("foreignCharset", () => {
  it("admits no charset, UTF-8 in any spelling and case, and US-ASCII", () => {
    for (const type of [undefined, "application/json", "application/json; charset=utf-8", "application/json;charset=UTF-8", "application/json; charset=utf8", "application/json; charset=Utf8", 'application/json; charset="utf-8"', "application/json; charset=us-ascii", "application/json; foo=bar"]) {
      expect([type, foreignCharset(type)]).toEqual([type, null]);
    }
  });

  it("names any other charset, lower-cased and unquoted, even after a UTF-8 one", () => {
    expect(foreignCharset("application/json; charset=utf-16le")).toBe("utf-16le");
    expect(foreignCharset("application/json; charset=UTF-16")).toBe("utf-16");
    expect(foreignCharset('application/json; charset="utf-7"')).toBe("utf-7");
    expect(foreignCharset("application/json; charset=latin1")).toBe("latin1");
    expect(foreignCharset("application/json; charset=")).toBe("");
    expect(foreignCharset("application/json; charset=utf-8; charset=utf-32")).toBe("utf-32");
  });
});

describe("parseUtf8Json", () => {
  const parse = (bytes: Buffer | string) => parseUtf8Json(Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes));

  it("reads an object or an array as UTF-8, after whitespace or a byte order mark", () => {
    expect(parse(' \n\t{"a":"é😀"}')).toEqual({ a: "é😀" });
    expect(parse(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from("[1]")]))).toEqual([1]);
    expect(parse("")).toEqual({});
  });

  it("refuses anything else with 400 invalid_request", () => {
    for (const text of ["1", '"s"', "null", " ", '{"a":', "{'a':1}", "[1]x"]) {
      let thrown: unknown;
      try {
        parse(text);
      } catch (err) {
        thrown = err;
      }
      expect([text, thrown instanceof AppError && thrown.code]).toEqual([text, "invalid_request"]);
    }
  });
});
