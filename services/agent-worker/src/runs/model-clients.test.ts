import { workerConfigSchema } from "../config";
import { ModelClients } from "./model-clients";

const configWith = (env: Record<string, string>) => workerConfigSchema.parse({ DATABASE_URL: "postgresql://x@127.0.0.1/db", ...env });
const keyOf = (clients: ModelClients, agent: { model: string; baseUrl: string | null }) => clients.forAgent(agent).client.apiKey;

describe("model clients", () => {
  it("sends OPENAI_API_KEY only to the hosted model's base URL", () => {
    const clients = new ModelClients(configWith({ OPENAI_API_KEY: "sk-deployment", OPENAI_BASE_URL: "https://models.example/v1" }));
    expect(keyOf(clients, { model: "gpt-x", baseUrl: null })).toBe("sk-deployment");
    expect(keyOf(clients, { model: "gpt-x", baseUrl: "https://models.example/v1/" })).toBe("sk-deployment");
    // An agent pointed at another server never gets the deployment's key.
    expect(keyOf(clients, { model: "gpt-x", baseUrl: "https://elsewhere.example/v1" })).toBe("none");
    expect(keyOf(clients, { model: "gpt-x", baseUrl: "https://models.example.evil/v1" })).toBe("none");
  });

  it("defaults the hosted model to OpenAI's URL", () => {
    const clients = new ModelClients(configWith({ OPENAI_API_KEY: "sk-deployment" }));
    expect(keyOf(clients, { model: "gpt-x", baseUrl: "https://api.openai.com/v1" })).toBe("sk-deployment");
    expect(clients.forAgent({ model: "gpt-x", baseUrl: null }).client.baseURL).toBe("https://api.openai.com/v1");
  });

  it("gives an agent's own base URL its key from MODEL_API_KEYS", () => {
    const clients = new ModelClients(
      configWith({ OPENAI_API_KEY: "sk-deployment", MODEL_API_KEYS: JSON.stringify({ "https://groq.example/openai/v1/": "gsk-own" }) }),
    );
    expect(keyOf(clients, { model: "llama", baseUrl: "https://groq.example/openai/v1" })).toBe("gsk-own");
    expect(keyOf(clients, { model: "llama", baseUrl: "https://other.example/v1" })).toBe("none");
  });

  it("refuses a MODEL_API_KEYS that is not a JSON object of URLs to keys", () => {
    for (const bad of ["not json", "[]", '{"not a url":"k"}', '{"https://a.example/v1":""}']) {
      expect(() => configWith({ MODEL_API_KEYS: bad })).toThrow(/MODEL_API_KEYS/);
    }
  });
});
