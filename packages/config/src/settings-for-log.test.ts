import { z } from "zod";
import { databaseUrl, dbPreparedStatements, envInteger, internalToken, loadConfig, port, redisPrefix, redisUrl } from "./index";
import { HIDDEN, settingsForLog } from "./settings-for-log";

// A service's schema, made of the shared fragments as each service's config.ts makes its own.
const serviceSchema = z.object({
  PORT: port(3000),
  DATABASE_URL: databaseUrl,
  REDIS_URL: redisUrl,
  REDIS_PREFIX: redisPrefix,
  DB_POOL_SIZE: envInteger(1, 100).default(20),
  DB_PREPARED_STATEMENTS: dbPreparedStatements,
  INTERNAL_TOKEN: internalToken,
  OPENAI_API_KEY: z.string().optional(),
  MODEL_API_KEYS: z.string().default("{}").transform((v) => JSON.parse(v) as Record<string, string>),
});

describe("settingsForLog", () => {
  it("shows every setting a service runs with, defaults included, in name order", () => {
    const settings = settingsForLog(loadConfig(serviceSchema, { PORT: "4100", DB_POOL_SIZE: "7" }));
    expect(settings).toMatchObject({ PORT: 4100, DB_POOL_SIZE: 7, REDIS_PREFIX: "agentrun", DB_PREPARED_STATEMENTS: true });
    expect(Object.keys(settings)).toEqual(Object.keys(settings).sort());
  });

  it("hides tokens, secrets and API keys, maps of keys included, whatever their value", () => {
    const token = "a-real-internal-token-0123456789";
    const settings = settingsForLog(
      loadConfig(serviceSchema, { INTERNAL_TOKEN: token, OPENAI_API_KEY: "sk-live-abcdef", MODEL_API_KEYS: JSON.stringify({ "https://llm.example/v1": "sk-other-123456" }) }),
    );
    expect(settings).toMatchObject({ INTERNAL_TOKEN: HIDDEN, OPENAI_API_KEY: HIDDEN, MODEL_API_KEYS: HIDDEN });
    const line = JSON.stringify(settings);
    for (const secret of [token, "sk-live-abcdef", "sk-other-123456"]) expect(line).not.toContain(secret);
    // Names that only contain such a word are settings, not secrets.
    expect(settingsForLog({ WIDGET_TOKEN_TTL_S: 900, TLS_KEY_FILE: "/etc/tls/key.pem", WIDGET_TOKEN_SECRET: "s3cret-value" })).toEqual({
      TLS_KEY_FILE: "/etc/tls/key.pem",
      WIDGET_TOKEN_SECRET: HIDDEN,
      WIDGET_TOKEN_TTL_S: 900,
    });
  });

  it("takes the password out of URLs and keeps the rest of them", () => {
    const settings = settingsForLog(
      loadConfig(serviceSchema, { DATABASE_URL: "postgresql://app:pg-pass-42@db.internal:5432/agentrun?sslmode=require", REDIS_URL: "redis://:redis-pass-7@cache:6379/2" }),
    );
    expect(settings.DATABASE_URL).toBe("postgresql://app:***@db.internal:5432/agentrun?sslmode=require");
    expect(settings.REDIS_URL).toBe("redis://:***@cache:6379/2");
    // A URL with a user and no password is shown as it is.
    expect(settingsForLog({ DATABASE_URL: "postgresql://postgres@127.0.0.1:5432/agentrun" })).toEqual({ DATABASE_URL: "postgresql://postgres@127.0.0.1:5432/agentrun" });
  });

  it("leaves out what is unset or not plain data", () => {
    expect(settingsForLog({ A: undefined, B: () => 1, C: ["x"], D: null })).toEqual({ C: ["x"], D: null });
  });
});
