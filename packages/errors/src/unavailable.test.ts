import { isConnectionLostError, isQueryTimeoutError, isUnavailableError, mayHaveBeenCarriedOut } from "./index";

/** An error as Prisma's pg adapter raises it for a refused statement, with PostgreSQL's SQLSTATE in `meta`. */
const prismaError = (sqlState: string, message: string) =>
  Object.assign(new Error(`Invalid \`prisma.$queryRaw()\` invocation: Raw query failed. Code: \`${sqlState}\`. Message: \`${message}\``), {
    code: "P2010",
    meta: { driverAdapterError: { name: "DriverAdapterError", cause: { originalCode: sqlState, originalMessage: message, kind: "postgres", code: sqlState, message } } },
  });

describe("isUnavailableError", () => {
  it("knows a database that is restarting or shutting down by its SQLSTATE", () => {
    expect(isUnavailableError(prismaError("57P03", "the database system is not yet accepting connections"))).toBe(true);
    expect(isUnavailableError(prismaError("57P01", "terminating connection due to administrator command"))).toBe(true);
    expect(isUnavailableError(Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" }))).toBe(true);
  });

  it("takes a process out of file descriptors for unavailable (503), not an internal error", () => {
    expect(isUnavailableError(Object.assign(new Error("connect EMFILE 127.0.0.1:5432 - Local (undefined:undefined)"), { code: "EMFILE" }))).toBe(true);
    expect(isUnavailableError(new Error("Raw query failed", { cause: new Error("connect EMFILE 127.0.0.1:5432") }))).toBe(true);
    expect(isUnavailableError(Object.assign(new Error("DriverAdapterError"), { name: "DriverAdapterError", cause: { message: "connect ENFILE 127.0.0.1:5432" } }))).toBe(true);
  });

  it("takes a Redis command not answered in time (ioredis's commandTimeout) for an outage that may have carried it out", () => {
    expect(isUnavailableError(new Error("Command timed out"))).toBe(true);
    expect(mayHaveBeenCarriedOut(new Error("Command timed out"))).toBe(true);
    expect(isUnavailableError(new Error("the model's command timed out after the tool ran"))).toBe(false);
  });

  it("does not take a refused value or a bug for an outage", () => {
    expect(isUnavailableError(prismaError("22P02", "invalid input syntax for type json"))).toBe(false);
    expect(isUnavailableError(prismaError("23505", "duplicate key value violates unique constraint"))).toBe(false);
    expect(isUnavailableError(new TypeError("x is undefined"))).toBe(false);
  });
});

describe("isQueryTimeoutError", () => {
  it("knows a statement the database did not answer in time (pg's query timeout), also as a cause, and counts it as an outage", () => {
    const timeout = new Error("Query read timeout");
    expect(isQueryTimeoutError(timeout)).toBe(true);
    expect(isQueryTimeoutError(new Error("the run could not be created", { cause: timeout }))).toBe(true);
    expect(isUnavailableError(timeout)).toBe(true);
  });

  it("does not take a refused connection for one: such a statement was never sent", () => {
    expect(isQueryTimeoutError(Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" }))).toBe(false);
    expect(isQueryTimeoutError(new Error("timeout exceeded when trying to connect"))).toBe(false);
  });
});

describe("causes", () => {
  it("are followed through a chain that loops back on itself, which ends the walk", () => {
    const a = new Error("outer") as Error & { cause?: unknown };
    const b = new Error("inner", { cause: a });
    a.cause = b;
    expect(isUnavailableError(a)).toBe(false);
    expect(isQueryTimeoutError(a)).toBe(false);
    const deep = new Error("wrapped", { cause: new Error("again", { cause: Object.assign(new Error("refused"), { code: "ECONNREFUSED" }) }) });
    expect(isUnavailableError(deep)).toBe(true);
  });
});

describe("mayHaveBeenCarriedOut", () => {
  it("is true for a statement sent and not answered: a query timeout, a connection lost mid-statement", () => {
    expect(mayHaveBeenCarriedOut(new Error("Query read timeout"))).toBe(true);
    expect(mayHaveBeenCarriedOut(new Error("Connection terminated unexpectedly"))).toBe(true);
    expect(mayHaveBeenCarriedOut(Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" }))).toBe(true);
    expect(mayHaveBeenCarriedOut(prismaError("57P01", "terminating connection due to administrator command"))).toBe(true);
  });

  it("is false where nothing was sent (no connection to be had) and for PostgreSQL's refusals", () => {
    expect(mayHaveBeenCarriedOut(Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" }))).toBe(false);
    expect(mayHaveBeenCarriedOut(new Error("timeout exceeded when trying to connect"))).toBe(false);
    expect(mayHaveBeenCarriedOut(prismaError("57P03", "the database system is not yet accepting connections"))).toBe(false);
    expect(mayHaveBeenCarriedOut(prismaError("53300", "sorry, too many clients already"))).toBe(false);
    expect(mayHaveBeenCarriedOut(prismaError("23505", "duplicate key value violates unique constraint"))).toBe(false);
    expect(mayHaveBeenCarriedOut(new TypeError("x is undefined"))).toBe(false);
  });
});

describe("isConnectionLostError", () => {
  it("is true for an HTTP connection that broke once open, as undici's fetch reports it", () => {
    const closed = Object.assign(new Error("other side closed"), { code: "UND_ERR_SOCKET" });
    expect(isConnectionLostError(new TypeError("fetch failed", { cause: closed }))).toBe(true);
    expect(isConnectionLostError(new TypeError("fetch failed", { cause: Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" }) }))).toBe(true);
  });

  it("is false where nothing shows that the request got through", () => {
    for (const cause of [
      Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:3002"), { code: "ECONNREFUSED" }),
      Object.assign(new Error("getaddrinfo EAI_AGAIN memory"), { code: "EAI_AGAIN" }),
      Object.assign(new Error("Connect Timeout Error"), { code: "UND_ERR_CONNECT_TIMEOUT" }),
      new Error("unexpected redirect"),
    ]) {
      expect(isConnectionLostError(new TypeError("fetch failed", { cause }))).toBe(false);
    }
  });
});
