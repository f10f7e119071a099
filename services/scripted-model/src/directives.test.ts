import { charCount, DEFAULT_CHUNKS, estimateTokens, MAX_CALL_ARGUMENTS_CHARS, parseDirectives, splitChunks } from "./directives";

describe("parseDirectives", () => {
  it("leaves plain text alone and reports no directives", () => {
    const { directives, rest } = parseDirectives("  hello world ");
    expect(rest).toBe("hello world");
    expect(directives).toEqual({ calls: [], text: [], malformed: false, hang: false });
  });

  it("reads combined numeric directives and removes them from the text", () => {
    const { directives, rest } = parseDirectives("[sleep:20][chunks:5] hello [usage:42]");
    expect(rest).toBe("hello");
    expect(directives.sleepMs).toBe(20);
    expect(directives.chunks).toBe(5);
    expect(directives.usage).toBe(42);
    expect(directives.errorStatus).toBeUndefined();
  });

  it("reads flags in order and the last value of a repeated scalar", () => {
    const { directives, rest } = parseDirectives("[history] [malformed][echo-system][hang][sleep:1][sleep:7]");
    expect(rest).toBe("");
    expect(directives.text).toEqual(["history", "echo-system"]);
    expect(directives.malformed).toBe(true);
    expect(directives.hang).toBe(true);
    expect(directives.sleepMs).toBe(7);
  });

  it("reads [finish:length] and [finish:content_filter], and leaves other finish reasons as text", () => {
    expect(parseDirectives("[finish:length] a").directives.finish).toBe("length");
    expect(parseDirectives("a [finish:content_filter]").directives.finish).toBe("content_filter");
    const other = parseDirectives("[finish:stop] a");
    expect([other.directives.finish, other.rest]).toEqual([undefined, "[finish:stop] a"]);
  });

  it("reads [stream-error] and [echo-key]", () => {
    const { directives, rest } = parseDirectives("hi [stream-error][echo-key]");
    expect(rest).toBe("hi");
    expect(directives).toMatchObject({ streamError: true, echoKey: true });
    expect(parseDirectives("hi").directives).not.toHaveProperty("streamError");
  });

  it("accepts error statuses 400-599 only", () => {
    expect(parseDirectives("[error:429]").directives.errorStatus).toBe(429);
    expect(parseDirectives("[error:503]").directives.errorStatus).toBe(503);
    const ok = parseDirectives("[error:200] x");
    expect(ok.directives.errorStatus).toBeUndefined();
    expect(ok.rest).toBe("[error:200] x");
  });

  it("treats [chunks:0] as one chunk", () => {
    expect(parseDirectives("[chunks:0]").directives.chunks).toBe(1);
  });

  it("parses call directives in order, with JSON args re-serialised and {} when missing", () => {
    const { directives, rest } = parseDirectives('[call:calc_evaluate {"expression": "2+2"}] then [call:memory.search] [call:f{"a":1}]');
    expect(rest).toBe("then");
    expect(directives.calls).toEqual([
      { name: "calc_evaluate", arguments: '{"expression":"2+2"}' },
      { name: "memory.search", arguments: "{}" },
      { name: "f", arguments: '{"a":1}' },
    ]);
  });

  it("finds the end of call args past brackets and braces inside strings and nested values", () => {
    const { directives, rest } = parseDirectives('[call:f {"a":[1,{"b":"]}"}],"c":"\\"]"} ] tail');
    expect(directives.calls).toEqual([{ name: "f", arguments: JSON.stringify({ a: [1, { b: "]}" }], c: '"]' }) }]);
    expect(rest).toBe("tail");
  });

  it("passes brace-balanced but invalid JSON args through verbatim", () => {
    expect(parseDirectives("[call:f {oops: 1}]").directives.calls).toEqual([{ name: "f", arguments: "{oops: 1}" }]);
  });

  it("takes call arguments up to MAX_CALL_ARGUMENTS_CHARS; longer ones leave the directive as text", () => {
    const args = (n: number) => JSON.stringify({ q: "a".repeat(n - 8) });
    expect(args(MAX_CALL_ARGUMENTS_CHARS)).toHaveLength(MAX_CALL_ARGUMENTS_CHARS);
    expect(parseDirectives(`[call:t ${args(MAX_CALL_ARGUMENTS_CHARS)}]`).directives.calls).toHaveLength(1);
    const long = `[call:t ${args(MAX_CALL_ARGUMENTS_CHARS + 1)}]`;
    expect(parseDirectives(long)).toMatchObject({ directives: { calls: [] }, rest: long });
  });

  it("reads a long message of unclosed call directives in time linear in its length (further calls then stay text)", () => {
    const message = "[call:a {".repeat(30_000);
    const started = Date.now();
    expect(parseDirectives(message).directives.calls).toEqual([]);
    // Scanned to its end (or 64 KiB) from each of the 30,000: tens of seconds.
    expect(Date.now() - started).toBeLessThan(2000);
    // Each message has a budget of its own: the next one's calls are read.
    expect(parseDirectives('[call:a {"x":1}] [call:b]').directives.calls.map((c) => c.name)).toEqual(["a", "b"]);
  });

  it("keeps malformed or unknown bracketed text as text", () => {
    for (const text of ['[call:f {"a":1]', "[call:]", "[call:f x]", "[unknown]", "[sleep:abc]", "[chunks:]", "[Echo-System]"]) {
      const { directives, rest } = parseDirectives(text);
      expect({ text, rest, calls: directives.calls.length, flags: directives.text.length }).toEqual({ text, rest: text, calls: 0, flags: 0 });
    }
  });
});

describe("splitChunks", () => {
  it("splits into the requested number of roughly equal pieces, longer pieces first", () => {
    expect(splitChunks("abcdefghij", 3)).toEqual(["abcd", "efg", "hij"]);
    expect(splitChunks("Echo: hello", 5)).toEqual(["Ech", "o:", " h", "el", "lo"]);
  });

  it("uses the default chunk count when none is given", () => {
    expect(DEFAULT_CHUNKS).toBe(4);
    expect(splitChunks("Echo: hi")).toEqual(["Ec", "ho", ": ", "hi"]);
  });

  it("gives one piece per character for a text shorter than the count", () => {
    expect(splitChunks("ab", 5)).toEqual(["a", "b"]);
  });

  it("gives one empty piece for the empty text and never an empty piece otherwise", () => {
    expect(splitChunks("", 4)).toEqual([""]);
    for (let n = 1; n <= 12; n += 1) {
      const pieces = splitChunks("0123456789", n);
      expect(pieces.join("")).toBe("0123456789");
      expect(pieces).toHaveLength(Math.min(n, 10));
      expect(pieces.every((p) => p.length > 0)).toBe(true);
    }
  });

  it("does not split surrogate pairs", () => {
    expect(splitChunks("😀😃", 2)).toEqual(["😀", "😃"]);
    expect(charCount("😀😃")).toBe(2);
  });
});

describe("estimateTokens", () => {
  it("rounds chars / 4 up", () => {
    expect([0, 1, 4, 5, 8].map(estimateTokens)).toEqual([0, 1, 1, 2, 2]);
  });
});
