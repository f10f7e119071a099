import OpenAI from "openai";
import type { WorkerConfig } from "../config";
import { createModelFetch } from "./model-fetch";

export interface ModelTarget {
  client: OpenAI;
  model: string;
}

/**
 * OpenAI SDK clients by base URL. An agent with its own base URL uses it; otherwise a hosted
 * model when OPENAI_API_KEY is set, and the scripted model when it is not (or when the agent's
 * model is "scripted").
 */
export class ModelClients {
  private readonly clients = new Map<string, OpenAI>();
  private readonly fetch = createModelFetch();

  constructor(private readonly config: WorkerConfig) {}

  forAgent(agent: { model: string; baseUrl: string | null }): ModelTarget {
    const scripted = agent.model === "scripted" || !this.config.OPENAI_API_KEY;
    const baseURL = agent.baseUrl ?? (scripted ? this.config.SCRIPTED_MODEL_URL : (this.config.OPENAI_BASE_URL ?? "https://api.openai.com/v1"));
    let client = this.clients.get(baseURL);
    if (!client) {
      client = new OpenAI({
        baseURL,
        apiKey: this.config.OPENAI_API_KEY ?? "scripted",
        maxRetries: this.config.MODEL_MAX_RETRIES,
        timeout: this.config.MODEL_TIMEOUT_MS,
        fetch: this.fetch,
      });
      this.clients.set(baseURL, client);
    }
    return { client, model: agent.model };
  }
}
