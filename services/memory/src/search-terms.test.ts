import { MAX_SEARCH_TERMS, orTsQuery, searchTerms } from "./search-terms";

describe("searchTerms", () => {
  it("keeps distinct lower-cased words and drops punctuation and domain stop words", () => {
    expect(searchTerms("What tea does the User like? Tea!")).toEqual(["what", "tea", "does", "the", "like"]);
  });

  it("never lets tsquery syntax through", () => {
    const terms = searchTerms("a & b | !c <-> 'd':* (e) \\f");
    expect(terms).toEqual(["a", "b", "c", "d", "e", "f"]);
    expect(orTsQuery(terms)).toBe("a | b | c | d | e | f");
  });

  it("keeps letters and digits of any script", () => {
    expect(searchTerms("Café in Zürich, 2024")).toEqual(["café", "in", "zürich", "2024"]);
  });

  it("bounds the number and length of terms", () => {
    const many = Array.from({ length: 200 }, (_, i) => `w${i}`).join(" ");
    expect(searchTerms(many)).toHaveLength(MAX_SEARCH_TERMS);
    expect(searchTerms(`${"x".repeat(101)} ok`)).toEqual(["ok"]);
  });

  it("returns nothing for an empty or symbol-only query", () => {
    expect(searchTerms("")).toEqual([]);
    expect(searchTerms(" ?! -- ")).toEqual([]);
    expect(searchTerms("users user")).toEqual([]);
    expect(orTsQuery([])).toBe("");
  });
});
