import { reachableAddresses } from "@agentrun/testing";

it("listens only on SCRIPTED_MODEL_HOST when it is set", async () => {
  expect(await reachableAddresses("scripted-model", "/v1/models")).toEqual({ own: true, other: false });
});
