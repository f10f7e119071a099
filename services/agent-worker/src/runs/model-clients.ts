import OpenAI from "openai";
import { baseUrlKey, type WorkerConfig } from "../config";
import { createModelFetch } from "./model-fetch";

const OPENAI_URL = "https://api.openai.com/v1";
/** What is sent as the key to a model that was given none (the SDK needs a value). */
const NO_KEY = "none";

export interface ModelTarget {
  client: OpenAI;
  model: string;
}

/**
 * What the openai SDK would otherwise take from the worker's environment and send to any base
 * URL: the organization and project ids (`OPENAI_ORG_ID`, `OPENAI_PROJECT_ID`), the admin key and
 * the headers of `OPENAI_CUSTOM_HEADERS` ("Name: value" lines). They are the hosted model's.
 */
const NOTHING_FROM_THE_ENVIRONMENT = () => ({
  organization: null,
  project: null,
  adminAPIKey: null,
  defaultHeaders: Object.fromEntries(
    (process.env.OPENAI_CUSTOM_HEADERS ?? "")
      .split("\n")
      .filter((line) => line.includes(":"))
      .map((line) => [line.slice(0, line.indexOf(":")).trim(), null]),
  ),
});

/**
 * OpenAI SDK clients by base URL. An agent with its own base URL uses it; otherwise a hosted
 * model when OPENAI_API_KEY is set, and the scripted model when it is not (or when the agent's
 * model is "scripted"). OPENAI_API_KEY is sent only to the hosted model's base URL: an agent's
 * own base URL gets its key from MODEL_API_KEYS, or none, so that an agent pointed at another
 * server never receives the deployment's key, nor what else the SDK reads from the environment
 * for the hosted model (organization, project, custom headers).
 */
export class ModelClients {
  private readonly clients = new Map<string, OpenAI>();
  private readonly fetch = createModelFetch();

  constructor(private readonly config: WorkerConfig) {}

  forAgent(agent: { model: string; baseUrl: string | null }): ModelTarget {
    const scripted = agent.model === "scripted" || !this.config.OPENAI_API_KEY;
    const baseURL = agent.baseUrl ?? (scripted ? this.config.SCRIPTED_MODEL_URL : (this.config.OPENAI_BASE_URL ?? OPENAI_URL));
    let client = this.clients.get(baseURL);
    if (!client) {
      client = new OpenAI({
        baseURL,
        apiKey: this.keyFor(baseURL),
        maxRetries: this.config.MODEL_MAX_RETRIES,
        timeout: this.config.MODEL_TIMEOUT_MS,
        fetch: this.fetch,
        ...(this.isHosted(baseURL) ? {} : NOTHING_FROM_THE_ENVIRONMENT()),
      });
      this.clients.set(baseURL, client);
    }
    return { client, model: agent.model };
  }

  private isHosted(baseURL: string): boolean {
    return baseUrlKey(baseURL) === baseUrlKey(this.config.OPENAI_BASE_URL ?? OPENAI_URL);
  }

  private keyFor(baseURL: string): string {
    const own = this.config.MODEL_API_KEYS[baseUrlKey(baseURL)];
    if (own) return own;
    return this.isHosted(baseURL) && this.config.OPENAI_API_KEY ? this.config.OPENAI_API_KEY : NO_KEY;
  }
}
