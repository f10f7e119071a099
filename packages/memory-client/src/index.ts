/** Typed HTTP client of the memory service's internal API, for the gateway and the worker. */
export {
  createMemoryClient,
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
