import { inexactNumber } from "./inexact-number";

const first = (text: string) => inexactNumber(Buffer.from(text));

describe("inexactNumber", () => {
  it("finds an integer beyond ±(2^53 − 1), which would be stored rounded", () => {
    expect(first('{"id":12345678901234567890}')).toBe("12345678901234567890");
    expect(first("[9007199254740992]")).toBe("9007199254740992");
    expect(first("[-9007199254740992]")).toBe("-9007199254740992");
    expect(first("[9007199254740991, -9007199254740991, 0, -0, 123456789012345]")).toBeNull();
  });

  it("finds a number beyond the range of a double, which would become null or 0", () => {
    expect(first('{"big":1e309}')).toBe("1e309");
    expect(first('{"big":-1.5E+400}')).toBe("-1.5E+400");
    expect(first('{"tiny":1e-400}')).toBe("1e-400");
    expect(first('{"tiny":0.000e-400}')).toBeNull(); // zero written otherwise
  });

  it("accepts what a double holds as written: fractions, exponents in range, long decimals", () => {
    expect(first('{"a":1.5e300,"b":0.1,"c":1e20,"d":-2.5E-300,"e":3.141592653589793238}')).toBeNull();
  });

  it("looks at numbers only, not at digits inside strings or keys", () => {
    expect(first('{"12345678901234567890":"99999999999999999999e999","n":1}')).toBeNull();
    expect(first('{"s":"a \\" 1e999 \\\\","n":[1e999]}')).toBe("1e999");
  });

  it("leaves what is not a JSON number to the parser, which refuses the body as invalid JSON", () => {
    expect(first('{"a":1.2.3.4.5.6.7.8.9.0.1.2}')).toBeNull();
    expect(first('{"a":12-34567890123456789}')).toBeNull();
    expect(first('{"a":0123456789012345678}')).toBeNull();
    expect(first('{"a":--12345678901234567890}')).toBeNull();
    expect(first('{"a":1.2.3,"b":12345678901234567890}')).toBe("12345678901234567890");
  });
});
