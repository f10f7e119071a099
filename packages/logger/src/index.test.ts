import { createLogger } from "./index";

const KEY = "sk-FAKE-0123456789abcdefghijklmnop";
const TOKEN = 'tok"en\\with-escapes-0123';

/** A logger with `secrets` whose lines are kept, as written. */
function capture(secrets?: readonly (string | undefined)[]) {
  const lines: string[] = [];
  const logger = createLogger({ service: "test", level: "info", secrets, destination: { write: (line: string) => void lines.push(line) } });
  return { logger, lines };
}

describe("createLogger", () => {
  it("removes the secrets from an error's message and stack, text fields, nested objects and messages", () => {
    const { logger, lines } = capture([KEY, TOKEN]);
    const err = new Error(`401 Incorrect API key provided: ${KEY}.`, { cause: new Error(`token ${TOKEN} refused`) });
    logger.warn({ err, detail: `upstream said ${KEY}`, upstream: { request: { note: [`key=${KEY}`] }, token2: TOKEN } }, `run failed with ${KEY}`);
    expect(lines).toHaveLength(1);
    const line = lines[0]!;
    expect(line).not.toContain(KEY);
    expect(line).not.toContain("sk-FAKE");
    expect(line).not.toContain(JSON.stringify(TOKEN).slice(1, -1));
    expect(line).not.toContain("with-escapes");
    const parsed = JSON.parse(line);
    // pino's error serializer appends the causes' messages.
    expect(parsed.err.message).toBe("401 Incorrect API key provided: [redacted].: token [redacted] refused");
    expect(parsed.err.stack).toContain("401 Incorrect API key provided: [redacted].");
    expect(parsed.detail).toBe("upstream said [redacted]");
    expect(parsed.upstream).toEqual({ request: { note: ["key=[redacted]"] }, token2: "[redacted]" });
    expect(parsed.msg).toBe("run failed with [redacted]");
  });

  it("removes bearer tokens in any case, listed as secrets or not, and keeps the word", () => {
    const { logger, lines } = capture();
    logger.error({ detail: "echoed Authorization: bearer unlisted-token-abcdef012345" }, "401: Incorrect API key provided: Bearer sk-other-9876543210.");
    const parsed = JSON.parse(lines[0]!);
    expect(parsed.detail).toBe("echoed Authorization: bearer [redacted]");
    expect(parsed.msg).toBe("401: Incorrect API key provided: Bearer [redacted]");
    expect(lines[0]).not.toMatch(/unlisted-token|sk-other/);
  });

  it("leaves prose about bearer tokens, short and missing secrets, and lines without secrets alone", () => {
    const { logger, lines } = capture([undefined, "", "short", KEY]);
    logger.info({ hint: "expected 'Bearer <API key>'", challenge: 'Bearer realm="agentrun"' }, "a short word stays");
    const parsed = JSON.parse(lines[0]!);
    expect(parsed).toMatchObject({ hint: "expected 'Bearer <API key>'", challenge: 'Bearer realm="agentrun"', msg: "a short word stays" });
  });

  it("scrubs the lines of child loggers too", () => {
    const { logger, lines } = capture([KEY]);
    logger.child({ runId: "run_1", echoed: KEY }).warn(`again ${KEY}`);
    expect(JSON.parse(lines[0]!)).toMatchObject({ runId: "run_1", echoed: "[redacted]", msg: "again [redacted]" });
  });

  it("replaces a secret that contains another one whole", () => {
    const { logger, lines } = capture(["abcdefgh", "xxabcdefghyy"]);
    logger.info("see xxabcdefghyy and abcdefgh");
    expect(JSON.parse(lines[0]!).msg).toBe("see [redacted] and [redacted]");
  });
});
