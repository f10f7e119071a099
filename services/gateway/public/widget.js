/*
 * agentrun chat widget. Embed with one tag:
 *   <script src="https://GATEWAY/widget.js" data-widget-key="pk_…" async></script>
 * Optional attributes: data-title, data-greeting, data-color (any CSS color).
 * Renders in a shadow root (the host page's CSS does not reach it), talks to the gateway's
 * widget API, and keeps the visitor's session and any answer in progress in localStorage, so an
 * answer interrupted by a page reload is picked up again where it stopped (Last-Event-ID).
 */
(function () {
  "use strict";
  var script = document.currentScript || document.querySelector("script[data-widget-key]");
  var KEY = script && script.getAttribute("data-widget-key");
  if (!KEY) return void console.warn("agentrun widget: data-widget-key is missing");
  var BASE = new URL(".", script.src).href.replace(/\/$/, "");
  var TITLE = script.getAttribute("data-title") || "Assistant";
  var GREETING = script.getAttribute("data-greeting") || "Hi! How can I help you today?";
  var COLOR = script.getAttribute("data-color");
  var STORE_KEY = "agentrun-widget:" + KEY;
  var MAX_STORED_MESSAGES = 50;
  var TEXT = {
    credits: "This assistant is out of credits right now. Please try again later.",
    limited: "You're sending messages a little too fast. Please wait a moment and try again.",
    busy: "The previous answer is still being written. Please wait for it to finish.",
    failed: "Sorry, something went wrong while answering. Please try again.",
    network: "Can't reach the assistant right now. Please check your connection and try again.",
    generic: "Sorry, the assistant is unavailable right now.",
    cancelled: "This answer was stopped.",
  };

  var state = load();
  var busy = false;

  function load() {
    try {
      var s = JSON.parse(localStorage.getItem(STORE_KEY) || "null");
      if (s && typeof s === "object") return { token: s.token || null, taskId: s.taskId || null, open: !!s.open, messages: Array.isArray(s.messages) ? s.messages : [], pending: s.pending || null };
    } catch (e) { /* storage blocked or corrupt: start fresh */ }
    return { token: null, taskId: null, open: false, messages: [], pending: null };
  }
  function save() {
    state.messages = state.messages.slice(-MAX_STORED_MESSAGES);
    try { localStorage.setItem(STORE_KEY, JSON.stringify(state)); } catch (e) { /* private mode: session lasts the page */ }
  }

  // public/widget.css, inlined by the gateway as it serves this file.
  var STYLES = "{{WIDGET_STYLES}}";

  var ICON = '<svg width="26" height="26" viewBox="0 0 24 24" fill="none" aria-hidden="true" focusable="false"><path d="M4 5h16v11H8l-4 4V5z" stroke="currentColor" stroke-width="2" stroke-linejoin="round"/></svg>';

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (text) e.textContent = text;
    return e;
  }

  var host = el("agentrun-chat", {});
  var root = host.attachShadow({ mode: "open" });
  try {
    var sheet = new CSSStyleSheet();
    sheet.replaceSync(STYLES);
    root.adoptedStyleSheets = [sheet];
  } catch (e) {
    root.appendChild(el("style", {}, STYLES));
  }
  if (COLOR && window.CSS && window.CSS.supports("color", COLOR)) host.style.setProperty("--ar-accent", COLOR);

  var panel = el("section", { class: "panel", role: "dialog", "aria-label": TITLE + " chat", id: "ar-panel", hidden: "" });
  var head = el("div", { class: "head" });
  var closeBtn = el("button", { class: "close", type: "button", "aria-label": "Close chat" }, "×");
  head.append(el("h2", {}, TITLE), closeBtn);
  var log = el("div", { class: "log", role: "log", "aria-live": "polite", "aria-label": "Conversation" });
  var form = el("form", { class: "composer" });
  var input = el("textarea", { id: "ar-input", rows: "1", placeholder: "Type a message…", maxlength: "32000" });
  var sendBtn = el("button", { class: "send", type: "submit" }, "Send");
  form.append(el("label", { class: "sr-only", for: "ar-input" }, "Your message"), input, sendBtn);
  panel.append(head, log, form);
  var bubble = el("button", { class: "bubble", type: "button", "aria-label": "Chat with the " + TITLE.toLowerCase(), "aria-expanded": "false", "aria-controls": "ar-panel" });
  bubble.innerHTML = ICON;
  root.append(panel, bubble);

  function setOpen(open, moveFocus) {
    panel.hidden = !open;
    bubble.setAttribute("aria-expanded", String(open));
    state.open = open;
    save();
    if (open) {
      log.scrollTop = log.scrollHeight;
      if (moveFocus) input.focus();
    } else if (moveFocus) bubble.focus();
  }
  bubble.addEventListener("click", function () { setOpen(panel.hidden, true); });
  closeBtn.addEventListener("click", function () { setOpen(false, true); });
  panel.addEventListener("keydown", function (e) { if (e.key === "Escape") { e.preventDefault(); setOpen(false, true); } });
  input.addEventListener("keydown", function (e) {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); form.requestSubmit ? form.requestSubmit() : submit(); }
  });
  form.addEventListener("submit", function (e) { e.preventDefault(); submit(); });

  function submit() {
    var text = input.value.trim();
    if (!text || busy) return;
    input.value = "";
    send(text);
  }

  /** A message bubble; assistant ones also have a tool-activity line. */
  function addMessage(role, text) {
    var m = el("div", { class: "msg " + role });
    var t = el("span", { class: "text" }, text);
    var status = el("span", { class: "status", hidden: "" });
    m.append(t, status);
    log.appendChild(m);
    log.scrollTop = log.scrollHeight;
    return {
      node: m,
      setText: function (s) { t.textContent = s; t.classList.toggle("dots", !s); log.scrollTop = log.scrollHeight; },
      setStatus: function (s) { status.hidden = !s; status.textContent = s || ""; },
    };
  }
  function remember(role, text) { state.messages.push({ role: role, text: text }); save(); }

  function setBusy(b) {
    busy = b;
    sendBtn.disabled = b;
    log.setAttribute("aria-busy", String(b));
  }

  function headers(extra) {
    var h = { "X-Widget-Key": KEY };
    if (state.token) h["X-Visitor-Token"] = state.token;
    for (var k in extra) h[k] = extra[k];
    return h;
  }
  var STATUS_TEXT = { 402: TEXT.credits, 409: TEXT.busy, 429: TEXT.limited };

  async function send(text) {
    setBusy(true);
    addMessage("user", text);
    remember("user", text);
    var view = addMessage("assistant", "");
    view.setText("");
    try {
      var res = await post(text);
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
    } finally {
      setBusy(false);
    }
  }

  /** A widget API call; null when the network failed. Keeps the renewed visitor token. */
  async function request(path, init) {
    try {
      var res = await fetch(BASE + "/api/v1/widget" + path, init);
      var token = res.headers.get("X-Visitor-Token");
      if (token) { state.token = token; save(); }
      return res;
    } catch (e) {
      return null;
    }
  }
  function post(text) {
    var body = { query: text, stream: true };
    if (state.taskId) body.task_id = state.taskId;
    return request("/run", { method: "POST", headers: headers({ "Content-Type": "application/json" }), body: JSON.stringify(body) });
  }

  function fail(view, message) {
    view.node.className = "msg error";
    view.setText(message);
    view.setStatus(null);
    state.pending = null;
    remember("error", message);
  }

  /** Re-attach answers worth another try; any other refusal ends the answer. */
  var RETRY_STATUS = { 429: true, 502: true, 503: true, 504: true };
  var MAX_RETRIES = 5, MAX_RETRY_MS = 30000;

  /**
   * Reads a run's event stream into `view` (`res` null: re-attach to the pending run first), and
   * re-attaches after the last event received whenever the stream ends before the run does. A lost
   * connection, 429 or 502-504 is retried after a growing delay, or the Retry-After asked for
   * (capped); the count starts over whenever a stream brought a new event, so only MAX_RETRIES
   * fruitless tries in a row give up. The pending run stays stored meanwhile (a reload resumes it).
   */
  async function follow(res, view) {
    for (var failures = 0; ; res = null) {
      var seq = state.pending ? state.pending.seq : 0, waitMs = 0;
      if (!res) res = await reattachRequest();
      // 204: the run has ended and nothing followed the last event this page holds.
      if (res && res.status === 204) return settle(view);
      if (res && !res.ok) {
        if (!RETRY_STATUS[res.status]) return fail(view, TEXT.failed);
        waitMs = retryAfterMs(res);
      } else if (res) {
        try {
          if (await readEvents(res, function (ev) { return onEvent(ev, view); })) return;
        } catch (e) { /* connection lost: re-attach below */ }
      }
      if (!state.pending) return fail(view, TEXT.network);
      failures = state.pending.seq > seq ? 0 : failures + 1;
      if (failures >= MAX_RETRIES) return fail(view, res && res.status === 429 ? TEXT.limited : TEXT.network);
      var backoff = 500 * Math.pow(2, failures) * (0.5 + Math.random() / 2);
      await new Promise(function (r) { setTimeout(r, Math.min(MAX_RETRY_MS, Math.max(waitMs, backoff))); });
    }
  }

  /** The wait a refusal asks for in Retry-After (seconds or an HTTP date), in ms; 0 without one. */
  function retryAfterMs(res) {
    var v = res.headers.get("Retry-After");
    var ms = !v ? 0 : /^\d+$/.test(v) ? Number(v) * 1000 : Date.parse(v) - Date.now();
    return ms > 0 ? ms : 0;
  }

  /** Ends the pending run with the text it has (its terminal event was read before a reload). */
  function settle(view) {
    var p = state.pending;
    if (!p || !p.text) return fail(view, TEXT.failed);
    view.setStatus(null);
    view.setText(p.text);
    state.pending = null;
    remember("assistant", p.text);
  }

  function reattachRequest() {
    var p = state.pending;
    var path = "/tasks/" + encodeURIComponent(p.taskId) + "/runs/" + encodeURIComponent(p.runId) + "/events";
    return request(path, { headers: headers({ Accept: "text/event-stream", "Last-Event-ID": String(p.seq) }) });
  }

  /** Applies one run event; true once the run has ended. */
  function onEvent(ev, view) {
    var p = state.pending;
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
      if (p.text) { state.pending = null; remember("assistant", p.text); view.setStatus(TEXT.cancelled); } else fail(view, TEXT.cancelled);
      return true;
    }
    save();
    return false;
  }

  /** Parses a text/event-stream body, calling `onEvent` with each event's JSON; true when it asked to stop. */
  async function readEvents(res, onEvent) {
    if (!res.body) return false;
    var reader = res.body.getReader(), decoder = new TextDecoder(), buf = "", data = [];
    for (;;) {
      var chunk = await reader.read();
      if (chunk.done) return false;
      buf += decoder.decode(chunk.value, { stream: true });
      var lines = buf.split("\n");
      buf = lines.pop();
      for (var i = 0; i < lines.length; i++) {
        var line = lines[i].replace(/\r$/, "");
        if (line === "") {
          if (data.length) {
            var ev = null;
            try { ev = JSON.parse(data.join("\n")); } catch (e) { /* not ours: skip */ }
            data = [];
            if (ev && onEvent(ev)) { reader.cancel().catch(function () {}); return true; }
          }
        } else if (line.indexOf("data:") === 0) data.push(line.slice(5).replace(/^ /, ""));
      }
    }
  }

  function restore() {
    addMessage("assistant", GREETING);
    for (var i = 0; i < state.messages.length; i++) addMessage(state.messages[i].role, state.messages[i].text);
    if (state.pending) {
      var view = addMessage("assistant", state.pending.text);
      view.setText(state.pending.text);
      setBusy(true);
      follow(null, view).finally(function () { setBusy(false); });
    }
    if (state.open) setOpen(true, false);
  }

  function mount() { document.body.appendChild(host); restore(); }
  if (document.body) mount();
  else document.addEventListener("DOMContentLoaded", mount);
})();
