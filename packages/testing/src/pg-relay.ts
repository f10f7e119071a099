import net from "node:net";
import { relaySwitch } from "./tcp-relay";

/**
 * A TCP relay in front of the test's PostgreSQL that can cut a connection at a chosen point of
 * the wire protocol, so that a client meets a real lost connection (the error `pg` raises, the
 * transaction PostgreSQL rolls back or has committed), not an error a test made up.
 */
export interface PgRelay {
  /** The database URL through the relay. */
  url: string;
  /**
   * The next statement sent through the relay (the next one whose text holds `match`, if given)
   * never reaches PostgreSQL: its connection is cut as it is sent. A statement's text is on the
   * wire the first time a connection runs it (before it is a prepared statement of that connection).
   */
  cutBeforeNextStatement(match?: string): void;
  /**
   * The next statement sent through the relay (the next one whose message holds `match`, if
   * given: its text, or a parameter it is sent with) is carried out, and its connection is cut
   * once PostgreSQL has answered it (ReadyForQuery: a statement outside a transaction block has
   * then committed), before the client reads that answer: a commit whose acknowledgement was lost.
   */
  cutAfterNextAnswer(match?: string): void;
  /** Cuts made so far. */
  cuts(): number;
  /**
   * While down, PostgreSQL is out of reach through the relay: open connections are cut at once
   * and new ones are closed as they are made (as a server that restarts, or a network that
   * drops, leaves its clients).
   */
  setDown(down: boolean): void;
  close(): Promise<void>;
}

/** The 8-byte SSLRequest a client may send before its startup message; PostgreSQL answers it with one unframed byte. */
const SSL_REQUEST_CODE = 80877103;

export async function startPgRelay(databaseUrl: string): Promise<PgRelay> {
  const target = new URL(databaseUrl);
  const targetPort = Number(target.port || 5432);
  const targetHost = target.hostname || "127.0.0.1";
  let before: { match?: string } | null = null;
  let after: { match?: string } | null = null;
  let cuts = 0;
  const sockets = new Set<net.Socket>();

  const server = net.createServer((client) => {
    if (relay.isDown()) return void client.destroy();
    const upstream = net.connect(targetPort, targetHost);
    sockets.add(client).add(upstream);
    const cut = () => {
      cuts++;
      client.destroy();
      upstream.destroy();
    };
    client.on("close", () => (upstream.destroy(), sockets.delete(client)));
    upstream.on("close", () => (client.destroy(), sockets.delete(upstream)));
    client.on("error", () => upstream.destroy());
    upstream.on("error", () => client.destroy());

    // Ready once PostgreSQL sent its first ReadyForQuery: from then on the client sends statements.
    let ready = false;
    let watching = false;
    let unframedBytes = 0;
    let pending = Buffer.alloc(0);
    /** Whether `chunk` from PostgreSQL completes a ReadyForQuery message ('Z'). */
    const endsAnswer = (chunk: Buffer): boolean => {
      let buf = Buffer.concat([pending, chunk]);
      let sawReady = false;
      if (unframedBytes > 0) {
        const skip = Math.min(unframedBytes, buf.length);
        unframedBytes -= skip;
        buf = buf.subarray(skip);
      }
      while (buf.length >= 5) {
        const length = buf.readInt32BE(1);
        if (buf.length < 1 + length) break;
        if (buf[0] === 0x5a) sawReady = true;
        buf = buf.subarray(1 + length);
      }
      pending = Buffer.from(buf);
      return sawReady;
    };

    let first = true;
    client.on("data", (chunk: Buffer) => {
      if (first && chunk.length >= 8 && chunk.readInt32BE(0) === 8 && chunk.readInt32BE(4) === SSL_REQUEST_CODE) unframedBytes = 1;
      first = false;
      if (ready && before && (before.match === undefined || chunk.includes(before.match))) {
        before = null;
        return cut();
      }
      if (ready && after && !watching && (after.match === undefined || chunk.includes(after.match))) {
        after = null;
        watching = true;
      }
      upstream.write(chunk);
    });
    upstream.on("data", (chunk: Buffer) => {
      const answered = endsAnswer(chunk);
      if (watching && answered) return cut();
      if (answered) ready = true;
      client.write(chunk);
    });
  });
  const relay = relaySwitch(server, sockets);
  server.listen(0, "127.0.0.1");
  await new Promise<void>((resolve, reject) => server.once("listening", resolve).once("error", reject));
  const relayed = new URL(databaseUrl);
  relayed.hostname = "127.0.0.1";
  relayed.port = String((server.address() as net.AddressInfo).port);

  return {
    url: relayed.toString(),
    cutBeforeNextStatement(match) {
      before = { match };
    },
    cutAfterNextAnswer(match) {
      after = { match };
    },
    cuts: () => cuts,
    setDown: relay.setDown,
    close: relay.close,
  };
}
