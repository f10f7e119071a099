import { closeRedis, createRedis, Redis } from "@agentrun/redis";
import { eventually, testEnv } from "@agentrun/testing";
import { SubscriberHub } from "./subscriber-hub";

// Real Redis: a subscriber connection under the hub and a command connection that publishes and
// asks PUBSUB NUMSUB. jest.spyOn keeps ioredis's own subscribe/unsubscribe and only counts them.
let pub: Redis;
let sub: Redis;
let hub: SubscriberHub;
const prefix = `${testEnv().redisPrefix}:hub`;
let n = 0;
const channel = () => `${prefix}:${++n}`;

beforeEach(async () => {
  pub = createRedis({ url: testEnv().redisUrl, role: "commands" });
  sub = createRedis({ url: testEnv().redisUrl, role: "subscriber" });
  hub = new SubscriberHub(sub);
  await Promise.all([pub.ping(), sub.ping()]);
});
afterEach(async () => {
  jest.restoreAllMocks();
  await Promise.all([closeRedis(pub), closeRedis(sub)]);
});

const subscribers = async (ch: string) => Number(((await pub.pubsub("NUMSUB", ch)) as [string, number])[1]);

describe("SubscriberHub", () => {
  it("subscribes the channels asked for in one turn with one SUBSCRIBE, and delivers each channel's messages to its handlers only", async () => {
    const subscribe = jest.spyOn(sub, "subscribe");
    const channels = Array.from({ length: 20 }, channel);
    const received = new Map<string, string[]>(channels.map((c) => [c, []]));
    const unsubs = await Promise.all(channels.map((c) => hub.subscribe(c, (m) => received.get(c)!.push(m))));

    expect(subscribe).toHaveBeenCalledTimes(1);
    expect(subscribe.mock.calls[0]).toEqual(channels);
    for (const c of channels) expect(await subscribers(c)).toBe(1);
    await Promise.all(channels.map((c) => pub.publish(c, `to ${c}`)));
    await eventually(async () => [...received.values()].every((m) => m.length === 1));
    for (const c of channels) expect(received.get(c)).toEqual([`to ${c}`]);
    expect(hub.channelCount).toBe(20);
    unsubs.forEach((u) => u());
  });

  it("leaves the channels dropped in one turn with one UNSUBSCRIBE, and only once their last handler is gone", async () => {
    const [a, b] = [channel(), channel()];
    const got: string[] = [];
    const [ua1, ua2, ub] = await Promise.all([hub.subscribe(a, (m) => got.push(`a1 ${m}`)), hub.subscribe(a, (m) => got.push(`a2 ${m}`)), hub.subscribe(b, () => {})]);
    const unsubscribe = jest.spyOn(sub, "unsubscribe");

    ua1();
    ua1(); // a second call changes nothing
    await new Promise((r) => setImmediate(r));
    expect(unsubscribe).not.toHaveBeenCalled(); // a still has a handler
    await pub.publish(a, "m1");
    await eventually(async () => got.length === 1);
    expect(got).toEqual(["a2 m1"]);

    ua2();
    ub();
    await eventually(async () => (await subscribers(a)) === 0 && (await subscribers(b)) === 0);
    expect(unsubscribe).toHaveBeenCalledTimes(1);
    expect(new Set(unsubscribe.mock.calls[0])).toEqual(new Set([a, b]));
    expect(hub.channelCount).toBe(0);
  });

  it("keeps the subscription when a channel is subscribed again in the turn it was left", async () => {
    const c = channel();
    const first = await hub.subscribe(c, () => {});
    const subscribe = jest.spyOn(sub, "subscribe");
    const unsubscribe = jest.spyOn(sub, "unsubscribe");
    const got: string[] = [];

    first();
    const again = await hub.subscribe(c, (m) => got.push(m));
    await new Promise((r) => setImmediate(r));
    expect(subscribe).not.toHaveBeenCalled();
    expect(unsubscribe).not.toHaveBeenCalled();
    expect(await subscribers(c)).toBe(1);
    await pub.publish(c, "still here");
    await eventually(async () => got.length === 1);
    expect(got).toEqual(["still here"]);
    again();
    await eventually(async () => (await subscribers(c)) === 0);
  });

  it("subscribes on a connection still in its handshake, which then becomes ready", async () => {
    const fresh = createRedis({ url: testEnv().redisUrl, role: "subscriber" });
    const freshHub = new SubscriberHub(fresh);
    const c = channel();
    const got: string[] = [];
    // Before the fix of the subscriber's options this left the connection in "connect" for good.
    const subscribed = new Promise<() => void>((resolve, reject) => fresh.once("connect", () => freshHub.subscribe(c, (m) => got.push(m)).then(resolve, reject)));
    const unsub = await subscribed;
    expect(await subscribers(c)).toBe(1);
    await eventually(async () => fresh.status === "ready");
    await pub.publish(c, "after the handshake");
    await eventually(async () => got.length === 1);
    expect(got).toEqual(["after the handshake"]);
    unsub();
    await closeRedis(fresh);
  });

  it("rejects every caller of a subscription Redis refused, and keeps none of their handlers", async () => {
    const offline = new Redis(testEnv().redisUrl, { lazyConnect: true });
    offline.disconnect(); // closed for good: every command is refused
    const failing = new SubscriberHub(offline);
    const c = channel();
    const results = await Promise.allSettled([failing.subscribe(c, () => {}), failing.subscribe(c, () => {})]);
    expect(results.map((r) => r.status)).toEqual(["rejected", "rejected"]);
    expect(failing.channelCount).toBe(0);
  });

  it("withdraws a caller that gives up while Redis is out of reach, keeping nothing of it", async () => {
    const down = createRedis({ url: "redis://127.0.0.1:1", role: "subscriber" });
    try {
      const waiting = new SubscriberHub(down);
      const giveUp = new AbortController();
      const subscribing = waiting.subscribe(channel(), () => {}, giveUp.signal);
      await new Promise((r) => setTimeout(r, 50));
      expect(waiting.channelCount).toBe(1);
      giveUp.abort(new Error("client gone"));
      await expect(subscribing).rejects.toThrow("client gone");
      expect(waiting.channelCount).toBe(0);
    } finally {
      down.disconnect(); // never connected: nothing to say goodbye to
    }
  });

  it("leaves a channel in Redis once confirmed when its only caller gave up before that", async () => {
    const c = channel();
    const giveUp = new AbortController();
    const subscribing = hub.subscribe(c, () => {}, giveUp.signal);
    giveUp.abort();
    await expect(subscribing).rejects.toThrow();
    expect(hub.channelCount).toBe(0);
    await eventually(async () => (await subscribers(c)) === 0 && (await pub.pubsub("CHANNELS", `${prefix}:*`)).includes(c) === false);
    // Another caller of the channel is served as usual.
    const got: string[] = [];
    await hub.subscribe(c, (m) => got.push(m));
    await pub.publish(c, "hello");
    await eventually(async () => got.length === 1);
  });
});
