import { TEXT } from "./config.js";
import { readEvents, retryAfterMs } from "./events.js";

const STATUS_TEXT = { 402: TEXT.credits, 409: TEXT.busy, 429: TEXT.limited };
/** Re-attach answers worth another try; any other refusal ends the answer. */
const RETRY_STATUS = { 429: true, 502: true, 503: true, 504: true };
const MAX_RETRIES = 5;
const MAX_RETRY_MS = 30000;

/**
 * The conversation with the widget gateway: sends the visitor's messages, streams each answer into
 * the panel, and keeps the answer in progress in the session so that it survives a reload.
 */
export function createConversation({ key, base }, { state, save }, panel) {
  function remember(role, text) {
    state.messages.push({ role, text });
    save();
  }

  function headers(extra) {
    const h = { "X-Widget-Key": key };
    if (state.token) h["X-Visitor-Token"] = state.token;
    return Object.assign(h, extra);
  }

  /** A widget API call; null when the network failed. Keeps the renewed visitor token. */
  async function request(path, init) {
    try {
      const res = await fetch(base + "/api/v1/widget" + path, init);
      const token = res.headers.get("X-Visitor-Token");
      if (token) {
        state.token = token;
        save();
      }
      return res;
    } catch (e) {
      return null;
    }
  }

  function post(text) {
    const body = { query: text, stream: true };
    if (state.taskId) body.task_id = state.taskId;
    return request("/run", { method: "POST", headers: headers({ "Content-Type": "application/json" }), body: JSON.stringify(body) });
  }

  function reattachRequest() {
    const p = state.pending;
    const path = "/tasks/" + encodeURIComponent(p.taskId) + "/runs/" + encodeURIComponent(p.runId) + "/events";
    return request(path, { headers: headers({ Accept: "text/event-stream", "Last-Event-ID": String(p.seq) }) });
  }

  function fail(view, message) {
    view.node.className = "msg error";
    view.setText(message);
    view.setStatus(null);
    state.pending = null;
    remember("error", message);
  }

  /** Ends the pending run with the text it has (its terminal event was read before a reload). */
  function settle(view) {
    const p = state.pending;
    if (!p || !p.text) return fail(view, TEXT.failed);
    view.setStatus(null);
    view.setText(p.text);
    state.pending = null;
    remember("assistant", p.text);
  }

  /** Applies one run event; true once the run has ended. */
  function onEvent(ev, view) {
    const p = state.pending;
    if (ev.type === "run_started") {
      state.pending = { runId: ev.run_id, taskId: ev.task_id, seq: ev.seq, text: "" };
      state.taskId = ev.task_id;
      save();
      return false;
    }
    if (!p || ev.seq <= p.seq) return false;
    p.seq = ev.seq;
    if (ev.type === "text_chunk") {
      p.text += ev.content;
      view.setText(p.text);
    } else if (ev.type === "tool_call") {
      view.setStatus("Using " + ev.tool + "…");
    } else if (ev.type === "tool_result") {
      view.setStatus(null);
    } else if (ev.type === "run_completed") {
      view.setStatus(null);
      view.setText(p.text);
      state.pending = null;
      remember("assistant", p.text);
      return true;
    } else if (ev.type === "run_failed") {
      fail(view, TEXT.failed);
      return true;
    } else if (ev.type === "run_cancelled") {
      if (p.text) {
        state.pending = null;
        remember("assistant", p.text);
        view.setStatus(TEXT.cancelled);
      } else fail(view, TEXT.cancelled);
      return true;
    }
    save();
    return false;
  }

  /**
   * Reads a run's event stream into `view` (`res` null: re-attach to the pending run first), and
   * re-attaches after the last event received whenever the stream ends before the run does. A lost
   * connection, 429 or 502-504 is retried after a growing delay, or the Retry-After asked for
   * (capped); the count starts over whenever a stream brought a new event, so only MAX_RETRIES
   * fruitless tries in a row give up. The pending run stays stored meanwhile (a reload resumes it).
   */
  async function follow(res, view) {
    for (let failures = 0; ; res = null) {
      const seq = state.pending ? state.pending.seq : 0;
      let waitMs = 0;
      if (!res) res = await reattachRequest();
      // 204: the run has ended and nothing followed the last event this page holds.
      if (res && res.status === 204) return settle(view);
      if (res && !res.ok) {
        if (!RETRY_STATUS[res.status]) return fail(view, TEXT.failed);
        waitMs = retryAfterMs(res);
      } else if (res) {
        try {
          if (await readEvents(res, (ev) => onEvent(ev, view))) return;
        } catch (e) {
          /* connection lost: re-attach below */
        }
      }
      if (!state.pending) return fail(view, TEXT.network);
      failures = state.pending.seq > seq ? 0 : failures + 1;
      if (failures >= MAX_RETRIES) return fail(view, res && res.status === 429 ? TEXT.limited : TEXT.network);
      const backoff = 500 * Math.pow(2, failures) * (0.5 + Math.random() / 2);
      await new Promise((r) => setTimeout(r, Math.min(MAX_RETRY_MS, Math.max(waitMs, backoff))));
    }
  }

  /** Runs `work` with the composer disabled. */
  async function whileBusy(work) {
    panel.setBusy(true);
    try {
      await work();
    } finally {
      panel.setBusy(false);
    }
  }

  return {
    /** Sends the visitor's message and streams the answer. */
    send(text) {
      return whileBusy(async () => {
        panel.addMessage("user", text);
        remember("user", text);
        const view = panel.addMessage("assistant", "");
        view.setText("");
        let res = await post(text);
        if (res && !res.ok && (res.status === 401 || res.status === 403 || res.status === 404) && (state.token || state.taskId)) {
          // Expired session, or a conversation that is gone: start a new one, once.
          if (res.status === 401) state.token = null;
          state.taskId = null;
          save();
          res = await post(text);
        }
        if (!res) return fail(view, TEXT.network);
        if (!res.ok) return fail(view, STATUS_TEXT[res.status] || TEXT.generic);
        await follow(res, view);
      });
    },
    /** Shows the stored transcript, and resumes the answer a reload interrupted. */
    restore(greeting) {
      panel.addMessage("assistant", greeting);
      for (const m of state.messages) panel.addMessage(m.role, m.text);
      if (!state.pending) return;
      const view = panel.addMessage("assistant", state.pending.text);
      view.setText(state.pending.text);
      void whileBusy(() => follow(null, view));
    },
  };
}
