import { MAX_PACED_CHUNK_CHARS, TEXT_PACE_MS, TextPacer, UNPACED_TEXT_CHUNKS } from "./text-pacer";

describe("TextPacer", () => {
  let events: string[];
  let pacer: TextPacer;

  beforeEach(() => {
    jest.useFakeTimers();
    events = [];
    pacer = new TextPacer((content) => events.push(content), () => jest.now());
  });

  afterEach(() => {
    pacer.flush();
    jest.useRealTimers();
  });

  const pushUnpaced = () => {
    for (let i = 0; i < UNPACED_TEXT_CHUNKS; i++) pacer.push(String(i % 10));
  };

  it("emits each of a run's first pieces of text as an event of its own, at once", () => {
    pacer.push("Hel");
    pacer.push("lo");
    pacer.push("");
    expect(events).toEqual(["Hel", "lo"]);
    pushUnpaced();
    // The two above count among the first thousand pieces: the last two pushed are held back.
    expect(events).toHaveLength(UNPACED_TEXT_CHUNKS);
  });

  it("past them, sends a burst as one event at the interval's end, nothing lost or reordered", () => {
    pushUnpaced();
    expect(events).toHaveLength(UNPACED_TEXT_CHUNKS);
    const burst = Array.from({ length: 5000 }, (_, i) => String.fromCharCode(97 + (i % 26)));
    for (const piece of burst) pacer.push(piece);
    expect(events).toHaveLength(UNPACED_TEXT_CHUNKS);
    jest.advanceTimersByTime(TEXT_PACE_MS - 1);
    expect(events).toHaveLength(UNPACED_TEXT_CHUNKS);
    jest.advanceTimersByTime(1);
    expect(events.slice(UNPACED_TEXT_CHUNKS)).toEqual([burst.join("")]);
  });

  it("sends a piece after a quiet spell at once, and at most one event per interval in a steady drip", () => {
    pushUnpaced();
    jest.advanceTimersByTime(TEXT_PACE_MS);
    pacer.push("after a pause");
    expect(events.at(-1)).toBe("after a pause");
    // A character every millisecond for one second: twenty events, not a thousand.
    const before = events.length;
    let sent = "";
    for (let ms = 0; ms < 1000; ms++) {
      pacer.push("x");
      sent += "x";
      jest.advanceTimersByTime(1);
    }
    pacer.flush();
    const paced = events.slice(before);
    expect(paced.join("")).toBe(sent);
    expect(paced.length).toBeLessThanOrEqual(1000 / TEXT_PACE_MS + 1);
    expect(paced.length).toBeGreaterThanOrEqual(1000 / TEXT_PACE_MS - 1);
  });

  it("sends what is held back once it reaches its size limit, without waiting", () => {
    pushUnpaced();
    const big = "y".repeat(MAX_PACED_CHUNK_CHARS / 4);
    for (let i = 0; i < 4; i++) pacer.push(big);
    expect(events.at(-1)).toBe(big.repeat(4));
  });

  it("flush sends what is held back at once and stops the timer", () => {
    pushUnpaced();
    pacer.push("held");
    pacer.flush();
    expect(events.at(-1)).toBe("held");
    const count = events.length;
    jest.advanceTimersByTime(10 * TEXT_PACE_MS);
    expect(events).toHaveLength(count);
    expect(jest.getTimerCount()).toBe(0);
    expect(pacer.chunks).toBe(count);
  });
});
