import { finalFailureOf } from "./run-failure";

describe("finalFailureOf", () => {
  it("is worker_lost for a job BullMQ failed because its lock lapsed too often", () => {
    expect(finalFailureOf(new Error("job stalled more than allowable limit"))).toMatchObject({ code: "worker_lost" });
  });

  it("is internal_error for a job that failed on every attempt", () => {
    expect(finalFailureOf(new Error("Connection is closed."))).toMatchObject({ code: "internal_error" });
  });
});
