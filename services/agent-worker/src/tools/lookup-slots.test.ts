import { LookupSlots, NoFreeSlot } from "./lookup-slots";

/** A lookup the test settles by hand. */
function pending<T>() {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => ((resolve = res), (reject = rej)));
  return { promise, resolve, reject };
}

const live = () => new AbortController().signal;
const tick = () => new Promise((r) => setTimeout(r, 20));

describe("LookupSlots", () => {
  it("starts a waiting lookup when one in flight settles, in order, and skips callers that stopped waiting", async () => {
    const slots = new LookupSlots(1, 1);
    const first = pending<string>();
    const started: string[] = [];
    const a = slots.run("org_a", () => (started.push("a"), first.promise), live());
    const gaveUp = new AbortController();
    const b = slots.run("org_b", () => (started.push("b"), Promise.resolve("b")), gaveUp.signal);
    const c = slots.run("org_c", () => (started.push("c"), Promise.resolve("c")), live());
    gaveUp.abort("timeout");
    const refused = await b.catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(NoFreeSlot);
    expect((refused as NoFreeSlot).reason).toBe("timeout");
    expect(started).toEqual(["a"]);
    first.resolve("a");
    await expect(a).resolves.toBe("a");
    await expect(c).resolves.toBe("c");
    expect(started).toEqual(["a", "c"]);
  });

  it("holds a slot until the lookup itself settles, also when its caller stopped waiting or it failed", async () => {
    const slots = new LookupSlots(1, 1);
    const first = pending<string>();
    const caller = new AbortController();
    const a = slots.run("org_a", () => first.promise, caller.signal);
    caller.abort("cancel");
    // The caller has its answer at once; the lookup goes on, in its slot.
    await expect(a).rejects.toBe("cancel");
    let secondStarted = false;
    const b = slots.run("org_b", async () => ((secondStarted = true), "b"), live());
    await tick();
    expect(secondStarted).toBe(false);
    first.reject(new Error("ENOTFOUND"));
    await expect(b).resolves.toBe("b");
  });

  it("leaves one organization at most its own share, the rest to the others", async () => {
    const slots = new LookupSlots(2, 1);
    const slow = pending<string>();
    const started: string[] = [];
    void slots.run("org_a", () => (started.push("a1"), slow.promise), live()).catch(() => {});
    const a2 = slots.run("org_a", () => (started.push("a2"), Promise.resolve("a2")), live());
    const b = slots.run("org_b", () => (started.push("b"), Promise.resolve("b")), live());
    await expect(b).resolves.toBe("b");
    expect(started).toEqual(["a1", "b"]);
    slow.resolve("a1");
    await expect(a2).resolves.toBe("a2");
  });

  it("gives back the slot of a lookup that throws at once", async () => {
    const slots = new LookupSlots(1, 1);
    await expect(
      slots.run(
        "org_a",
        () => {
          throw new Error("bad name");
        },
        live(),
      ),
    ).rejects.toThrow("bad name");
    await expect(slots.run("org_a", async () => "next", live())).resolves.toBe("next");
  });
});
