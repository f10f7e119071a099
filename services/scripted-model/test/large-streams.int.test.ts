import { readFileSync } from "node:fs";
import { createParser } from "eventsource-parser";
import { freePort, startService, waitForOk, type ServiceProcess } from "@agentrun/testing";

// Streams far larger than a socket buffer, from the scripted model as its own process: written at
// the client's pace, so the process never holds a whole stream of millions of chunks.
let model: ServiceProcess;
let url: string;

beforeAll(async () => {
  const port = await freePort();
  model = startService("scripted-model", { SCRIPTED_MODEL_PORT: String(port), SCRIPTED_MODEL_HOST: "127.0.0.1" });
  url = `http://127.0.0.1:${port}`;
  await waitForOk(`${url}/health`, model);
}, 60_000);

afterAll(async () => {
  await model?.stop();
});

/** The process's peak resident memory so far, in MiB (VmHWM). */
const peakRssMiB = () => Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${model.child.pid}/status`, "utf8"))![1]) / 1024;

it("streams a [chunks:N] answer of 300,000 one-character chunks whole, at the client's pace", async () => {
  const text = "x".repeat(300_000);
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "scripted", stream: true, messages: [{ role: "user", content: `[chunks:999999999] ${text}` }] }),
  });
  expect(res.status).toBe(200);
  let answer = "";
  let chunks = 0;
  let done = false;
  const parser = createParser({
    onEvent: ({ data }) => {
      if (data === "[DONE]") return void (done = true);
      const content = JSON.parse(data).choices[0]?.delta?.content;
      if (typeof content === "string" && content !== "") {
        answer += content;
        chunks += 1;
      }
    },
  });
  const decoder = new TextDecoder();
  for await (const part of res.body!) parser.feed(decoder.decode(part, { stream: true }));
  expect(done).toBe(true);
  expect(answer).toBe(`Echo: ${text}`);
  expect(chunks).toBe(answer.length);
  // The stream was about 45 MB; held whole, the process grew by several times that.
  expect(peakRssMiB()).toBeLessThan(300);
}, 120_000);

/** The process's resident memory now, in MiB (VmRSS). */
const rssMiB = () => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${model.child.pid}/status`, "utf8"))![1]) / 1024;

it("holds one chunk at a time of a 5,000,000-character answer whose client reads slowly", async () => {
  const before = rssMiB();
  const controller = new AbortController();
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "scripted", stream: true, messages: [{ role: "user", content: `[chunks:999999999] ${"y".repeat(5_000_000)}` }] }),
    signal: controller.signal,
  });
  expect(res.status).toBe(200);
  const reader = res.body!.getReader();
  const first = new TextDecoder().decode((await reader.read()).value);
  expect(first).toContain('"role":"assistant"');
  // The client stops reading: the model waits for the socket to drain, mid-stream.
  await new Promise((r) => setTimeout(r, 1500));
  // The request itself (5 MB of JSON, the message and its echo) takes some MiB (14 here); the
  // message's text collected a character at a time, and the answer's five million chunks made
  // up front, took about 230 MiB more.
  expect(rssMiB() - before).toBeLessThan(80);
  controller.abort();
}, 60_000);
