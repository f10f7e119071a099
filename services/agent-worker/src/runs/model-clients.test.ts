import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
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

describe("what the SDK reads from the environment", () => {
  const env = { OPENAI_ORG_ID: "org-deployment", OPENAI_PROJECT_ID: "proj-deployment", OPENAI_CUSTOM_HEADERS: "X-Internal-Auth: s3cret\nX-Team: core" };
  const saved: Record<string, string | undefined> = {};
  beforeAll(() => {
    for (const [k, v] of Object.entries(env)) {
      saved[k] = process.env[k];
      process.env[k] = v;
    }
  });
  afterAll(() => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  });

  /** The headers of one request through the client for `baseUrl`, to a server standing in for both models. */
  async function headersSent(config: Record<string, string>, agentBaseUrl: (server: string) => string | null): Promise<IncomingHttpHeaders> {
    let seen: IncomingHttpHeaders = {};
    const server = createServer((req, res) => {
      seen = req.headers;
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ object: "list", data: [] }));
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
      const clients = new ModelClients(configWith({ OPENAI_API_KEY: "sk-deployment", OPENAI_BASE_URL: `${url}/hosted`, ...config }));
      await clients.forAgent({ model: "gpt-x", baseUrl: agentBaseUrl(url) }).client.models.list();
      return seen;
    } finally {
      server.close();
    }
  }

  it("goes to the hosted model's base URL", async () => {
    const headers = await headersSent({}, () => null);
    expect(headers).toMatchObject({ authorization: "Bearer sk-deployment", "openai-organization": "org-deployment", "openai-project": "proj-deployment", "x-internal-auth": "s3cret", "x-team": "core" });
  });

  it("never goes to an agent's own base URL", async () => {
    const headers = await headersSent({}, (url) => `${url}/own`);
    expect(headers.authorization).toBe("Bearer none");
    for (const name of ["openai-organization", "openai-project", "x-internal-auth", "x-team"]) expect([name, headers[name]]).toEqual([name, undefined]);
  });
});
