// Tests run against the real PostgreSQL and Redis: the global setup creates a fresh database
// (migrated with the committed migrations) and a Redis key prefix for this run, and the
// teardown removes both.
// ts-jest transpiles each file on its own (no type check here: `npm run typecheck` does that).
// Pure-JS tooling on purpose: native transformers ship per-platform binaries that some
// registries do not carry, which would make `npm ci` fail on a fresh clone.
const tsJest = ["ts-jest", { isolatedModules: true, tsconfig: { module: "commonjs", moduleResolution: "node", target: "es2022", esModuleInterop: true, resolveJsonModule: true } }];

const common = {
  testEnvironment: "node",
  transform: { "^.+\\.tsx?$": tsJest },
  moduleFileExtensions: ["ts", "js", "json"],
};

/** @type {import('jest').Config} */
module.exports = {
  globalSetup: "<rootDir>/packages/testing/src/global-setup.ts",
  globalTeardown: "<rootDir>/packages/testing/src/global-teardown.ts",
  testTimeout: 60_000,
  // One test file at a time: every stack of a run shares its database, and a stack's worker
  // sweeps (orphaned and stale queued runs) act on every run in it, so files run side by side
  // would end or re-queue each other's runs. (Jest's default on two cores is this already.)
  maxWorkers: 1,
  projects: [
    {
      ...common,
      displayName: "unit",
      testMatch: ["<rootDir>/packages/*/src/**/*.test.ts", "<rootDir>/services/*/src/**/*.test.ts", "<rootDir>/bench/lib/**/*.test.ts"],
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
