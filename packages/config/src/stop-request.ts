/**
 * How a service learns that it should stop: SIGTERM or SIGINT, and, when a supervisor started it
 * with an IPC channel (`npm run dev`, `npm start`), that channel closing. Those supervisors start
 * each service in a session of its own, so that Ctrl-C reaches only them and they can stop the
 * stack in order (gateway and workers first, then the services they call); a service must then
 * not outlive a supervisor that was killed without stopping it.
 */
export function onStopRequest(stop: (reason: string) => void): void {
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
  if (process.channel) {
    // The channel only watches the supervisor: it must not keep a stopping process alive.
    process.channel.unref();
    process.on("disconnect", () => stop("supervisor exited"));
  }
}
