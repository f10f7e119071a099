/** zod schemas and types shared by the gateway, the worker, the memory service and tests. */
export * from "./common";
export * from "./events";
export * from "./runs";
export * from "./memory";
export * from "./widget";
export * from "./tasks";
