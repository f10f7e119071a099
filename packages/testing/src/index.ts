/** Test helpers: the environment the global setup prepared, and the in-process stack. */
export { testEnv, type TestEnv } from "./env";
