import net from "node:net";

/**
 * Sends `text` as it is (a request the fetch API would not send: duplicated or malformed
 * headers, a body shorter than its Content-Length) to the server at `baseUrl`, and resolves with
 * everything the server sent until it closed the connection. Rejects if it is still open after
 * `timeoutMs`.
 */
export function rawExchange(baseUrl: string, text: string, { timeoutMs = 5000 }: { timeoutMs?: number } = {}): Promise<string> {
  const { hostname, port } = new URL(baseUrl);
  return new Promise<string>((resolve, reject) => {
    const socket = net.connect(Number(port), hostname);
    let got = "";
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`the server kept the connection open for ${timeoutMs} ms; it sent: ${got.slice(0, 300)}`));
    }, timeoutMs);
    socket.on("data", (d: Buffer) => (got += d.toString("utf8")));
    socket.on("close", () => {
      clearTimeout(timer);
      resolve(got);
    });
    socket.on("error", () => undefined);
    socket.write(text);
  });
}

/**
 * The request head of `method path` with `headers` (names as given; as a list of pairs, a name
 * may come more than once), ending in the blank line.
 */
export function rawHead(method: string, path: string, headers: Record<string, string> | [string, string][]): string {
  return `${method} ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\n${(Array.isArray(headers) ? headers : Object.entries(headers))
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join("")}\r\n`;
}

/** The status and JSON body of an answer read whole by {@link rawExchange} (`{}` for no body). */
export function rawJsonAnswer(answer: string): { status: number; body: any } {
  const [statusLine, body] = answer.split("\r\n\r\n");
  return { status: Number(statusLine!.split(" ")[1]), body: JSON.parse(body || "{}") };
}
