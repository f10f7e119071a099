import { strictQueryParser } from "./strict-query";

describe("strictQueryParser", () => {
  it("reads every parameter: none is dropped after the thousandth", () => {
    const many = Array.from({ length: 1500 }, (_, i) => `p${i}=${i}`).join("&");
    const parsed = strictQueryParser(`${many}&status=bogus`);
    expect(Object.keys(parsed)).toHaveLength(1501);
    expect(parsed.p1499).toBe("1499");
    expect(parsed.status).toBe("bogus");
  });

  it("refuses a malformed percent-encoding", () => {
    expect(() => strictQueryParser("a=%zz")).toThrow(/malformed percent-encoding/);
  });
});
