import { reachableAddresses, testEnv } from "@agentrun/testing";

it("listens only on MEMORY_HOST when it is set", async () => {
  const reach = await reachableAddresses("memory", "/healthz", { DATABASE_URL: testEnv().databaseUrl });
  expect(reach).toEqual({ own: true, other: false });
});
