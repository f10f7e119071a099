import net from "node:net";
import { Transform } from "node:stream";

/**
 * A plain TCP relay in front of a server (Redis, say) that can be taken down for the processes
 * connected through it alone, while the server stays up for everyone else: a network partition
 * of one process, which then reconnects on its own schedule.
 */
export interface TcpRelay {
  /** The relay's port on 127.0.0.1. */
  port: number;
  /** Connections the relay has carried since it started (each reconnect is one more). */
  accepted(): number;
  /** While down, open connections are cut at once and new ones are closed as they are made. */
  setDown(down: boolean): void;
  /**
   * The next bytes the server sends are dropped and their connection cut: a reply lost on the
   * way (a client such as ioredis then sends the unanswered command again on a new connection).
   */
  loseNextReply(): void;
  close(): Promise<void>;
}

/** What every relay shares: its open sockets, all cut when it is taken down, and its close. */
export function relaySwitch(server: net.Server, sockets: Set<net.Socket>): Pick<TcpRelay, "setDown" | "close"> & { isDown(): boolean } {
  let down = false;
  return {
    isDown: () => down,
    setDown(on) {
      down = on;
      if (on) for (const s of sockets) s.destroy();
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export async function startTcpRelay(targetHost: string, targetPort: number): Promise<TcpRelay> {
  const sockets = new Set<net.Socket>();
  let accepted = 0;
  let loseNext = false;
  const server = net.createServer((client) => {
    if (relay.isDown()) return void client.destroy();
    accepted++;
    const upstream = net.connect(targetPort, targetHost);
    sockets.add(client).add(upstream);
    client.on("close", () => (upstream.destroy(), sockets.delete(client)));
    upstream.on("close", () => (client.destroy(), sockets.delete(upstream)));
    client.on("error", () => upstream.destroy());
    upstream.on("error", () => client.destroy());
    client.pipe(upstream);
    const replies = new Transform({
      transform(chunk: Buffer, _encoding, done) {
        if (!loseNext) return done(null, chunk);
        loseNext = false;
        client.destroy();
        upstream.destroy();
        done();
      },
    });
    upstream.pipe(replies).pipe(client);
  });
  const relay = relaySwitch(server, sockets);
  server.listen(0, "127.0.0.1");
  await new Promise<void>((resolve, reject) => server.once("listening", resolve).once("error", reject));
  return { port: (server.address() as net.AddressInfo).port, accepted: () => accepted, setDown: relay.setDown, loseNextReply: () => void (loseNext = true), close: relay.close };
}
