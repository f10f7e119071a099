// Tests run against the real PostgreSQL and Redis: the global setup creates a fresh database
// (migrated with the committed migrations) and a Redis key prefix for this run, and the
// teardown removes both.
const swc = ["@swc/jest", { jsc: { parser: { syntax: "typescript" }, target: "es2022" }, module: { type: "commonjs" } }];

const common = {
  testEnvironment: "node",
  transform: { "^.+\\.(t|j)sx?$": swc },
  moduleFileExtensions: ["ts", "js", "json"],
};

/** @type {import('jest').Config} */
module.exports = {
  globalSetup: "<rootDir>/packages/testing/src/global-setup.ts",
  globalTeardown: "<rootDir>/packages/testing/src/global-teardown.ts",
  testTimeout: 60_000,
  projects: [
    {
      ...common,
      displayName: "unit",
      testMatch: ["<rootDir>/packages/*/src/**/*.test.ts", "<rootDir>/services/*/src/**/*.test.ts"],
    },
    {
      ...common,
      displayName: "integration",
      testMatch: ["<rootDir>/services/*/test/**/*.int.test.ts"],
    },
    {
      ...common,
      displayName: "faults",
      testMatch: ["<rootDir>/services/*/test/**/*.fault.test.ts"],
    },
  ],
};
