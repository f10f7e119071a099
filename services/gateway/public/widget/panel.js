import STYLES from "./widget.css";

const ICON = '<svg width="26" height="26" viewBox="0 0 24 24" fill="none" aria-hidden="true" focusable="false"><path d="M4 5h16v11H8l-4 4V5z" stroke="currentColor" stroke-width="2" stroke-linejoin="round"/></svg>';

/** The longest message the API takes (QUERY_MAX_CHARS of the run contract), in UTF-16 code units as maxlength counts. */
const MAX_CHARS = 32000;

function el(tag, attrs, text) {
  const e = document.createElement(tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (text) e.textContent = text;
  return e;
}

/**
 * The widget's elements in a shadow root (the host page's CSS does not reach them): a bubble that
 * opens a dialog with the conversation's log and a composer. `onOpenChange(open)` hears every
 * opening and closing; `onSubmit(text)` each message the visitor sends (Enter or the button);
 * `onStop()` each press of the Stop button, shown while an answer is being written.
 */
export function createPanel({ title, color }, { onOpenChange, onSubmit, onStop }) {
  const host = el("agentrun-chat", {});
  const root = host.attachShadow({ mode: "open" });
  try {
    const sheet = new CSSStyleSheet();
    sheet.replaceSync(STYLES);
    root.adoptedStyleSheets = [sheet];
  } catch (e) {
    root.appendChild(el("style", {}, STYLES));
  }
  // A color of its own: not a keyword or variable that would take the page's (or no) color.
  const ownColor = color && !/var\(|^\s*(inherit|initial|unset|revert|revert-layer|currentcolor|transparent)\s*$/i.test(color);
  if (ownColor && window.CSS && window.CSS.supports("color", color)) host.style.setProperty("--ar-accent", color);

  const panel = el("section", { class: "panel", role: "dialog", "aria-label": title + " chat", id: "ar-panel", hidden: "" });
  const head = el("div", { class: "head" });
  const closeBtn = el("button", { class: "close", type: "button", "aria-label": "Close chat" }, "×");
  head.append(el("h2", {}, title), closeBtn);
  const log = el("div", { class: "log", role: "log", "aria-live": "polite", "aria-label": "Conversation" });
  const form = el("form", { class: "composer" });
  const input = el("textarea", { id: "ar-input", rows: "1", placeholder: "Type a message…", maxlength: String(MAX_CHARS), "aria-describedby": "ar-limit" });
  const sendBtn = el("button", { class: "send", type: "submit" }, "Send");
  const stopBtn = el("button", { class: "stop", type: "button", "aria-label": "Stop the answer", hidden: "" }, "Stop");
  form.append(el("label", { class: "sr-only", for: "ar-input" }, "Your message"), input, stopBtn, sendBtn);
  // The browser cuts what goes past maxlength (a long paste) without a word: say so.
  const limit = el("p", { class: "limit", id: "ar-limit", role: "status", hidden: "" }, `A message holds up to ${MAX_CHARS.toLocaleString("en-US")} characters; the rest was left out.`);
  panel.append(head, log, form, limit);
  const bubble = el("button", { class: "bubble", type: "button", "aria-label": "Chat with " + title, "aria-expanded": "false", "aria-controls": "ar-panel" });
  bubble.innerHTML = ICON;
  root.append(panel, bubble);

  let busy = false;
  function setOpen(open, moveFocus) {
    panel.hidden = !open;
    bubble.setAttribute("aria-expanded", String(open));
    onOpenChange(open);
    if (open) {
      log.scrollTop = log.scrollHeight;
      if (moveFocus) input.focus();
    } else if (moveFocus) bubble.focus();
  }
  function submit() {
    const text = input.value.trim();
    if (!text || busy) return;
    input.value = "";
    limit.hidden = true;
    onSubmit(text);
  }
  bubble.addEventListener("click", () => setOpen(panel.hidden, true));
  bubble.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && !panel.hidden) {
      e.preventDefault();
      setOpen(false, true);
    }
  });
  closeBtn.addEventListener("click", () => setOpen(false, true));
  stopBtn.addEventListener("click", () => onStop());
  panel.addEventListener("keydown", (e) => {
    if (e.key === "Escape") {
      e.preventDefault();
      setOpen(false, true);
    }
  });
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      if (form.requestSubmit) form.requestSubmit();
      else submit();
    }
  });
  input.addEventListener("input", () => {
    limit.hidden = input.value.length < MAX_CHARS;
  });
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    submit();
  });

  return {
    host,
    setOpen,
    /** While busy (an answer is being written) the visitor cannot send. */
    setBusy(b) {
      // A disabled button drops the focus to the page: keep it in the dialog, in the input.
      if (b && root.activeElement === sendBtn) input.focus();
      busy = b;
      sendBtn.disabled = b;
      log.setAttribute("aria-busy", String(b));
    },
    /**
     * The Stop button: `"ready"` while an answer is being written, `"stopping"` (disabled) once
     * pressed until that answer ends, hidden otherwise (null).
     */
    setStop(stop) {
      // A button disabled or hidden drops the focus to the page: keep it in the dialog, in the input.
      if (stop !== "ready" && root.activeElement === stopBtn) input.focus();
      stopBtn.hidden = !stop;
      stopBtn.disabled = stop === "stopping";
    },
    /** Puts `text` back in the composer (unless the visitor has typed something else since). */
    offer(text) {
      if (!input.value.trim()) input.value = text;
    },
    /** Empties the conversation's log. */
    clear() {
      log.textContent = "";
    },
    /** A message bubble with a status line (tool activity, notes); `setText` shows dots while `writing`. */
    addMessage(role, text) {
      const m = el("div", { class: "msg " + role });
      const t = el("span", { class: "text" }, text);
      const status = el("span", { class: "status", hidden: "" });
      m.append(t, status);
      log.appendChild(m);
      log.scrollTop = log.scrollHeight;
      return {
        node: m,
        setText(s, writing = !s) {
          t.textContent = s;
          t.classList.toggle("dots", writing);
          log.scrollTop = log.scrollHeight;
        },
        setStatus(s) {
          status.hidden = !s;
          status.textContent = s || "";
        },
      };
    },
  };
}
