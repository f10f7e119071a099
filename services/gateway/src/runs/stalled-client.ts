import type { Request, Response } from "express";

/**
 * Longest a response waits for its client to take what was written once the response is full (the
 * response's high-water mark, where `write` asks the writer to wait for `drain`). A client that
 * takes nothing for this long is disconnected, which releases the response and what it holds.
 */
export const STALLED_CLIENT_TIMEOUT_MS = 10_000;

export interface StallTimer {
  /** Starts the wait, unless it is running: a response that is full, or ended and not finished. */
  arm(): void;
  /** Stops it: the client took something (`drain`), or the response finished or closed. */
  disarm(): void;
}

/**
 * The wait of {@link STALLED_CLIENT_TIMEOUT_MS} for a client to take something of `res`: past
 * it, `message` is logged and the response destroyed (which closes its socket, drops what is
 * buffered and emits `close`). It measures no progress at all, not the time the answer takes: the
 * caller arms it when a write finds the response full and disarms it at each `drain`.
 */
export function stallTimer(req: Request, res: Response, timeoutMs: number, message: string): StallTimer {
  let stalled: NodeJS.Timeout | null = null;
  return {
    arm() {
      if (stalled) return;
      stalled = setTimeout(() => {
        req.log?.warn({ stalledMs: timeoutMs }, message);
        res.destroy();
      }, timeoutMs);
      stalled.unref();
    },
    disarm() {
      if (stalled) clearTimeout(stalled);
      stalled = null;
    },
  };
}

/**
 * The slices a large answer is written in: the size of a socket's high-water mark, so that the
 * response's buffer holds about two of them while the client is behind, and each `drain` tells
 * that the client took about that much.
 */
const SLICE_BYTES = 16 * 1024;

type End = (...args: unknown[]) => Response;

/**
 * Writes `res`'s answer at its client's pace, and disconnects a client that takes nothing of it
 * for {@link STALLED_CLIENT_TIMEOUT_MS}, as an event stream does (see openSse). Call it before the
 * answer is sent. `res.send` hands Node a body in one write, which the socket then holds whole (a
 * run's JSON events, a page of messages, a `stream: false` result can be many megabytes) with no
 * progress to watch until all of it is taken: a client that stopped reading kept it, and its
 * connection, for as long as it stayed connected. A larger body is written here in slices, the
 * next once the response drains, so that a client's progress is seen slice by slice: one that
 * reads slowly gets all of it, however long that takes. An end without a body (HEAD, 204, the
 * end of an event stream, which watches its own client) is left as it is.
 */
export function paceAnswer(req: Request, res: Response, timeoutMs: number = STALLED_CLIENT_TIMEOUT_MS): void {
  const end = res.end.bind(res) as End;
  res.end = ((...args: unknown[]) => {
    const [chunk] = args;
    if (typeof chunk !== "string" && !(chunk instanceof Uint8Array)) return end(...args);
    // Made only for an answer the socket cannot take at once: most are sent in one go.
    let stall: StallTimer | null = null;
    const arm = () => {
      if (!stall) {
        const timer = (stall = stallTimer(req, res, timeoutMs, "disconnected a client that took nothing of its answer in time"));
        res.once("finish", timer.disarm);
        res.once("close", timer.disarm);
      }
      // A response queued behind an earlier one on its connection (pipelining) has no socket yet:
      // its wait starts when it gets one (the earlier answer is watched by its own route).
      if (res.socket) stall.arm();
      else res.once("socket", () => !res.writableFinished && stall?.arm());
    };
    // The socket outlives the response (keep-alive) and has no idle timeout: a client that never
    // takes the end of an answer must not keep it buffered. `finish` disarms this.
    const endWith = (...endArgs: unknown[]) => {
      end(...endArgs);
      if ((res.socket?.writableLength ?? 0) > 0 && !res.writableFinished) arm();
      return res;
    };
    const encoding = typeof args[1] === "string" ? (args[1] as BufferEncoding) : "utf8";
    const bytes = typeof chunk === "string" ? Buffer.byteLength(chunk, encoding) : chunk.byteLength;
    if (bytes <= SLICE_BYTES) return endWith(...args);
    const body = typeof chunk === "string" ? Buffer.from(chunk, encoding) : Buffer.from(chunk.buffer, chunk.byteOffset, bytes);
    const callback = args.find((a) => typeof a === "function");
    let offset = 0;
    const pump = () => {
      while (!res.destroyed) {
        const slice = body.subarray(offset, (offset += SLICE_BYTES));
        if (offset >= body.length) return void endWith(slice, callback);
        if (!res.write(slice)) return arm();
      }
    };
    res.on("drain", () => {
      stall?.disarm();
      pump();
    });
    pump();
    return res;
  }) as Response["end"];
}
