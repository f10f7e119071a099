import { silenceLimitMs } from "./events.js";

/** A message's Idempotency-Key: 128 random bits (pages served over plain HTTP have no randomUUID). */
function newKey() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * The widget API of the gateway at `base`, called as the visitor of `session`: every request
 * carries the widget key and the latest visitor token, and keeps the token the gateway renewed.
 * Each call answers the Response, or null when the network failed.
 */
export function createApi({ key, base }, session) {
  const state = session.state;
  let warned = false;

  function headers(extra) {
    const h = { "X-Widget-Key": key };
    if (state.token) h["X-Visitor-Token"] = state.token;
    return Object.assign(h, extra);
  }

  /**
   * A widget API call; null when the network failed, or when no answer began within the time a
   * silent stream is given (a stuck proxy holds requests too).
   */
  async function request(path, init) {
    const headersDue = new AbortController();
    const timer = setTimeout(() => headersDue.abort(), silenceLimitMs());
    try {
      const res = await fetch(base + "/api/v1/widget" + path, Object.assign({ signal: headersDue.signal }, init));
      const token = res.headers.get("X-Visitor-Token");
      if (token && token !== state.token) session.update((s) => (s.token = token));
      return res;
    } catch (e) {
      // A browser tells a page nothing more: a CORS refusal looks like a network failure.
      if (!warned) console.warn("agentrun widget: could not reach " + base + " (offline, or this page's origin is not allowed for the widget key)");
      warned = true;
      return null;
    } finally {
      clearTimeout(timer);
    }
  }

  /** The request of a message (`s`: its key and body), stored until its run's first event so that a reload sends it again. */
  function sending(s) {
    session.saveSending(s);
    const init = { method: "POST", headers: headers({ "Content-Type": "application/json", "Idempotency-Key": s.key }), body: JSON.stringify(s.body) };
    return () => request("/run", init);
  }

  /** The path of the pending run `p`'s `action`. */
  const runPath = (p, action) => "/tasks/" + encodeURIComponent(p.taskId) + "/runs/" + encodeURIComponent(p.runId) + "/" + action;

  return {
    /**
     * A message as sent, with an Idempotency-Key of its own: a function that sends it, the same
     * request each time (the session as it was, whatever other tabs change meanwhile). Sent again
     * (its answer was lost before the run's first event), the gateway answers with the run it
     * started instead of starting another.
     */
    message(text) {
      const body = { query: text, stream: true };
      if (state.taskId) body.task_id = state.taskId;
      return sending({ key: newKey(), body, at: Date.now() });
    },
    sending,
    /** Re-attaches to the pending run after the last event received (`Last-Event-ID`). */
    reattach() {
      const p = state.pending;
      return request(runPath(p, "events"), { headers: headers({ Accept: "text/event-stream", "Last-Event-ID": String(p.seq) }) });
    },
    /** Asks the gateway to stop the run of the answer `p` (no body); its stream then ends. */
    cancel(p) {
      return request(runPath(p, "cancel"), { method: "POST", headers: headers() });
    },
  };
}
