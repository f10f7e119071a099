import { LookupSlots } from "./lookup-slots";

/** A lookup the test settles by hand. */
function pending<T>() {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => ((resolve = res), (reject = rej)));
  return { promise, resolve, reject };
}

const live = () => new AbortController().signal;

describe("LookupSlots", () => {
  it("starts a waiting lookup when one in flight settles, in order, and skips callers that stopped waiting", async () => {
    const slots = new LookupSlots(1);
    const first = pending<string>();
    const started: string[] = [];
    const a = slots.run(() => (started.push("a"), first.promise), live());
    const gaveUp = new AbortController();
    const b = slots.run(() => (started.push("b"), Promise.resolve("b")), gaveUp.signal);
    const c = slots.run(() => (started.push("c"), Promise.resolve("c")), live());
    gaveUp.abort("timeout");
    await expect(b).rejects.toBe("timeout");
    expect(started).toEqual(["a"]);
    first.resolve("a");
    await expect(a).resolves.toBe("a");
    await expect(c).resolves.toBe("c");
    expect(started).toEqual(["a", "c"]);
  });

  it("holds a slot until the lookup itself settles, also when it fails", async () => {
    const slots = new LookupSlots(1);
    const first = pending<string>();
    const a = slots.run(() => first.promise, live());
    let secondStarted = false;
    const b = slots.run(async () => ((secondStarted = true), "b"), live());
    await new Promise((r) => setTimeout(r, 20));
    expect(secondStarted).toBe(false);
    first.reject(new Error("ENOTFOUND"));
    await expect(a).rejects.toThrow("ENOTFOUND");
    await expect(b).resolves.toBe("b");
  });
});
