import { TEXT } from "./config.js";
import { readEvents, retryAfterMs } from "./events.js";
import { createApi } from "./api.js";

const STATUS_TEXT = { 402: TEXT.credits, 409: TEXT.busy, 429: TEXT.limited };
/** A gateway in trouble, or a proxy before it (which may have been stopped after it accepted the run). */
const GATEWAY_TROUBLE = { 502: true, 503: true, 504: true };
/** Re-attach answers worth another try; any other refusal ends the answer. */
const RETRY_STATUS = Object.assign({ 429: true }, GATEWAY_TROUBLE);
/** A re-attach refused for good: the key revoked or not allowed here, the conversation deleted. */
const REFUSED_FOR_GOOD = { 401: true, 403: true, 404: true };
const MAX_RETRIES = 5;
const MAX_RETRY_MS = 30000;
/** The note under an answer the model ended early (`run_completed.finish_reason`). */
const CUT_NOTE = { length: TEXT.cutShort, content_filter: TEXT.filtered };

/**
 * The conversation with the widget gateway: sends the visitor's messages, streams each answer into
 * the panel, and keeps the answer in progress in the session so that it survives a reload, a
 * connection lost for longer than the retries last, and the visitor's next message.
 */
export function createConversation(config, session, panel) {
  const state = session.state;
  const api = createApi(config, session);
  /** The answer the retries gave up on (its run goes on): resumed before the next message, or when the browser is back online. */
  let interrupted = null;
  let interruptedNote = null;
  let busy = false;
  let stale = false;
  /** The run the visitor pressed Stop for, until its answer ends: Stop stays disabled meanwhile. */
  let stopping = null;

  /** Adds to the transcript; a run's answer once, also when two tabs followed it. */
  function remember(role, text, extra) {
    session.update((s) => {
      if (extra && extra.runId && s.messages.some((m) => m.runId === extra.runId && m.role === role)) return;
      s.messages.push(Object.assign({ role, text }, extra));
    });
  }

  function setPending(p) {
    state.pending = p;
    session.savePending(true);
    showStop();
  }

  /** Stop is offered while this tab follows an answer in progress (a run has started), whatever re-attaches that takes. */
  function showStop() {
    const run = busy && pendingRun();
    panel.setStop(run ? (run === stopping ? "stopping" : "ready") : null);
  }

  /** Ends the answer with an error; `runId`: the run's own end, noted once when two tabs followed it. */
  function fail(view, message, runId) {
    session.saveSending(null);
    view.node.className = "msg error";
    view.setText(message, false);
    view.setStatus(null);
    setPending(null);
    remember("error", message, runId ? { runId } : undefined);
  }

  /** The run of the answer in progress, if any. */
  const pendingRun = () => state.pending && state.pending.runId;

  /** Ends the pending run's answer with the text it has, and an optional note under it. */
  function complete(view, note) {
    const p = state.pending;
    view.setText(p.text, false);
    view.setStatus(note || null);
    setPending(null);
    remember("assistant", p.text, note ? { runId: p.runId, note } : { runId: p.runId });
  }

  /** Applies one run event; true once the run has ended. */
  function onEvent(ev, view) {
    const p = state.pending;
    // The position stored and sent back as Last-Event-ID is a seq: an event without one is not the gateway's.
    if (!Number.isInteger(ev.seq)) return false;
    if (ev.type === "run_started") {
      setPending({ runId: ev.run_id, taskId: ev.task_id, seq: ev.seq, text: "" });
      session.saveSending(null);
      if (state.taskId !== ev.task_id) session.update((s) => (s.taskId = ev.task_id));
      return false;
    }
    // A seq not past the last one is a repeat, but for the run's end: after events the service
    // lost (see the events endpoint) it comes with a lower seq, and it still ends the answer.
    const ends = ev.type === "run_completed" || ev.type === "run_failed" || ev.type === "run_cancelled";
    if (!p || (ev.seq <= p.seq && !ends)) return false;
    p.seq = Math.max(p.seq, ev.seq);
    if (ev.type === "text_chunk") {
      p.text += ev.content;
      view.setText(p.text);
    } else if (ev.type === "tool_call") {
      view.setStatus("Using " + ev.tool + "…");
    } else if (ev.type === "tool_result") {
      view.setStatus(null);
    } else if (ev.type === "run_completed") {
      // An answer the model ended early says so; one without any text is no answer at all.
      if (p.text) complete(view, CUT_NOTE[ev.finish_reason]);
      else fail(view, TEXT.noAnswer, p.runId);
      return true;
    } else if (ev.type === "run_failed") {
      // What the visitor has read stays, as a stopped answer's does.
      if (p.text) complete(view, TEXT.failedPartway);
      else fail(view, TEXT.failed, p.runId);
      return true;
    } else if (ev.type === "run_cancelled") {
      if (p.text) complete(view, TEXT.cancelled);
      else fail(view, TEXT.cancelled, p.runId);
      return true;
    }
    session.savePending(false);
    return false;
  }

  /**
   * Reads a run's event stream into `view` (`res` null: re-attach to the pending run first), and
   * re-attaches after the last event received whenever the stream ends before the run does. Until
   * the run's first event has arrived there is nothing to re-attach to: `repost` sends the message
   * again, with its Idempotency-Key (a 409 then is the first request still being accepted, retried
   * too). A lost connection, 429 or 502-504 is retried after a growing delay, or the Retry-After
   * asked for (capped); the count starts over whenever a stream brought a new event, so only
   * MAX_RETRIES fruitless tries in a row stop trying. Then the text so far stays, with a note, and
   * the answer stays pending: it is resumed before the visitor's next message, when the browser is
   * back online, or after a reload.
   */
  async function follow(res, view, repost) {
    for (let failures = 0; ; res = null) {
      const seq = state.pending ? state.pending.seq : 0;
      let waitMs = 0;
      if (!res) res = state.pending ? await api.reattach() : repost ? await repost() : null;
      // 204: the run has ended and nothing followed the last event this page holds: no text, no answer.
      if (res && res.status === 204) return state.pending && state.pending.text ? complete(view) : fail(view, TEXT.noAnswer, pendingRun());
      if (res && !res.ok) {
        // A message sent again may find the first request still being accepted (409): it waits too.
        const retry = RETRY_STATUS[res.status] || (res.status === 409 && !state.pending && repost);
        // A re-attach refused for good (a revoked key, a conversation deleted): what was read stays.
        if (!retry && state.pending && state.pending.text) return complete(view, TEXT.failedPartway);
        // Noted as the run's end (which every tab following it takes as such) only when it is final.
        if (!retry) return fail(view, (!state.pending && STATUS_TEXT[res.status]) || TEXT.failed, REFUSED_FOR_GOOD[res.status] ? pendingRun() : undefined);
        waitMs = retryAfterMs(res);
      } else if (res) {
        try {
          if (await readEvents(res, (ev) => onEvent(ev, view))) return;
        } catch (e) {
          /* connection lost: re-attach below */
        }
      }
      if (!state.pending && !repost) return fail(view, TEXT.network);
      if (state.pending) session.savePending(true);
      failures = state.pending && state.pending.seq > seq ? 0 : failures + 1;
      if (!state.pending && failures >= MAX_RETRIES) return fail(view, res && !res.ok ? STATUS_TEXT[res.status] || TEXT.generic : TEXT.network);
      if (failures >= MAX_RETRIES) {
        interrupted = view;
        // The last try reached the gateway, or a proxy before it, when it was answered 429 or 502-504.
        interruptedNote = !res || res.ok ? TEXT.network : res.status === 429 ? TEXT.limited : TEXT.generic;
        view.setText(state.pending.text, false);
        return view.setStatus(interruptedNote);
      }
      const backoff = 500 * Math.pow(2, failures) * (0.5 + Math.random() / 2);
      await new Promise((r) => setTimeout(r, Math.min(MAX_RETRY_MS, Math.max(waitMs, backoff))));
    }
  }

  /**
   * Sends a message (`post`, the request of `text`) and streams its answer into `view`. An expired
   * session or a conversation that is gone (401, 403, 404 while the session holds either) starts a
   * new conversation, once. `resent`: the message was sent before (a reload came before its
   * answer), so its first answer is taken as a repeat's is (see `follow`): a 409 is its first
   * request still being accepted, waited for as the retried statuses are.
   */
  async function start(post, text, view, resent) {
    let res = await post();
    if (res && !res.ok && (res.status === 401 || res.status === 403 || res.status === 404) && (state.token || state.taskId)) {
      session.update((s) => {
        if (res.status === 401) s.token = null;
        s.taskId = null;
      });
      post = api.message(text);
      res = await post();
    }
    // A gateway in trouble is asked again below, with the same request and key, as a lost answer is.
    const waits = res && (resent ? RETRY_STATUS[res.status] || res.status === 409 : GATEWAY_TROUBLE[res.status]);
    if (res && !res.ok && !waits) return fail(view, STATUS_TEXT[res.status] || TEXT.generic);
    // No answer (the request or its answer was lost): sent again, the same request, below.
    await follow(res, view, post);
  }

  /** Runs `work` with the composer disabled; shows what other tabs added meanwhile once it ends. */
  async function whileBusy(work) {
    busy = true;
    panel.setBusy(true);
    showStop();
    try {
      await work();
    } finally {
      busy = false;
      panel.setBusy(false);
      showStop();
      if (stale) render();
    }
  }

  /** Follows the pending answer into `view` until it ends or the retries stop. */
  function resume(view) {
    interrupted = null;
    view.setStatus(null);
    return follow(null, view);
  }

  /** The transcript as stored, and the pending answer of this tab's session unless another tab has noted its end. */
  function render() {
    stale = false;
    const run = pendingRun();
    if (run && state.messages.some((m) => m.runId === run)) {
      interrupted = null;
      setPending(null);
    }
    panel.clear();
    panel.addMessage("assistant", config.greeting);
    for (const m of state.messages) panel.addMessage(m.role, m.text).setStatus(m.note || null);
    if (!state.pending) return null;
    const view = panel.addMessage("assistant", state.pending.text);
    view.setText(state.pending.text);
    if (!interrupted) return view;
    // The retries stopped: the answer waits, as shown before, for the next try.
    interrupted = view;
    view.setText(state.pending.text, false);
    view.setStatus(interruptedNote);
    return view;
  }

  session.onChange(() => {
    if (busy) stale = true;
    else render();
  });
  window.addEventListener("online", () => {
    if (interrupted && !busy && state.pending) void whileBusy(() => resume(interrupted));
  });

  return {
    /** Sends the visitor's message and streams the answer (after the answer still pending, if any). */
    send(text) {
      return whileBusy(async () => {
        if (interrupted && state.pending) {
          await resume(interrupted);
          // Still out of reach: the message waits in the composer rather than being lost with the answer before it.
          if (interrupted) return panel.offer(text);
        }
        panel.addMessage("user", text);
        remember("user", text);
        const view = panel.addMessage("assistant", "");
        view.setText("");
        await start(api.message(text), text, view);
      });
    },
    /**
     * Asks the gateway to stop the answer being written: its stream then ends with run_cancelled,
     * shown as a stopped answer (its text so far kept). Refused or unsent, Stop can be pressed again.
     */
    async stop() {
      const p = state.pending;
      if (!busy || !p || stopping === p.runId) return;
      stopping = p.runId;
      showStop();
      const res = await api.cancel(p);
      if ((!res || !res.ok) && stopping === p.runId) {
        stopping = null;
        showStop();
      }
    },
    /** Shows the stored transcript, and resumes the answer a reload interrupted, or sends again the message it did. */
    restore() {
      const view = render();
      if (view) return void whileBusy(() => resume(view));
      if (!state.sending) return;
      const answer = panel.addMessage("assistant", "");
      answer.setText("");
      const s = state.sending;
      void whileBusy(() => start(api.sending(s), s.body.query, answer, true));
    },
  };
}
