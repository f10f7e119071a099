/** Typed HTTP client of the memory service's internal API, for the gateway and the worker. */
export {
  createMemoryClient,
  MEMORY_ANSWER_MAX_BYTES,
  type MemoryClient,
  type MemoryClientOptions,
  type CallOptions,
  type CreateMemoryRequest,
  type CreateMemoryResponse,
  type ListMemoriesRequest,
  type SearchMemoriesRequest,
  type MemoryContextRequest,
  type ScoredMemoryEntryView,
} from "./memory-client";
