/** How many messages of the transcript the browser keeps. */
const MAX_STORED_MESSAGES = 50;
/** The answer in progress is saved at most this often while it streams (and at once when it starts or ends). */
const PENDING_SAVE_INTERVAL_MS = 500;
const ROLES = { user: true, assistant: true, error: true };
/**
 * How long after it was first sent a message still unanswered by its run's first event is sent
 * again after a reload: well within the 24 h its Idempotency-Key is kept, and short enough that a
 * visitor back days later does not see an old question asked anew.
 */
const SENDING_RESUME_MS = 10 * 60 * 1000;
/** This tab's own storage, which a reload keeps (a getter: where storage is blocked, reading it throws). */
const tabStorage = () => sessionStorage;

/**
 * The visitor's session in localStorage, shared by every tab of the site (one entry per widget
 * key): the visitor token, the task, whether the panel is open and the transcript; and, in an entry
 * of its own, the answer in progress (`pending`: its run, task, last seq and text so far), so a page
 * reload resumes the answer where it stopped. That entry is written at most twice a second while the
 * answer streams, and whenever the page is hidden or unloaded. The message this tab is sending
 * whose run has not said its first event yet (its Idempotency-Key and body) is kept in the tab's
 * sessionStorage (`sending`), which a reload keeps and other tabs do not see: a reload sends it
 * again and shows the answer of the run it started, and no other tab sends it or drops it.
 *
 * Tabs change the shared entry only through `update`, which applies the change to what is stored
 * now, so that one tab does not overwrite what another has just written; `onChange` hears another
 * tab's changes. Storage that is blocked or full leaves a session that lasts the page.
 */
export function openSession(widgetKey) {
  const storeKey = "agentrun-widget:" + widgetKey;
  const pendingKey = storeKey + ":pending";
  const sendingKey = storeKey + ":sending";
  let stored = read(storeKey);
  // A session whose visitor token has expired is over: its conversation can no longer be reached
  // (the next message starts a new one), and its transcript must not greet the next person at
  // this browser days later.
  if (stored && isText(stored.token) && tokenExpired(stored.token)) {
    stored = { open: stored.open === true };
    write(storeKey, stored);
    remove(pendingKey);
    // A message this tab was sending belongs to that conversation too (its body names the task).
    remove(sendingKey, tabStorage);
  }
  const state = Object.assign(shared(stored), { pending: validPending(read(pendingKey)) || validPending(stored && stored.pending), sending: validSending(read(sendingKey, tabStorage)) });
  let lastPendingSave = 0;
  let pendingTimer = null;
  /** The run whose answer this tab stored last: the only stored answer it may remove. */
  let ownRun = state.pending && state.pending.runId;

  const refresh = () => {
    const now = read(storeKey);
    if (now) Object.assign(state, shared(now));
  };
  const writePending = () => {
    clearTimeout(pendingTimer);
    pendingTimer = null;
    lastPendingSave = Date.now();
    if (state.pending) {
      write(pendingKey, state.pending);
      ownRun = state.pending.runId;
    } else {
      // Another tab's answer in progress (stored after this tab's) stays for it.
      const stored = validPending(read(pendingKey));
      if (stored && stored.runId === ownRun) remove(pendingKey);
      ownRun = null;
    }
  };

  // A page that goes away (reload, navigation, a tab put in the background that may be discarded)
  // stores the progress its throttle was holding back.
  const flush = () => {
    if (pendingTimer) writePending();
  };
  window.addEventListener("pagehide", flush);
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "hidden") flush();
  });

  return {
    state,
    /** Applies `change(state)` to the session as stored now (another tab may have changed it), and stores it. */
    update(change) {
      refresh();
      change(state);
      state.messages = state.messages.slice(-MAX_STORED_MESSAGES);
      write(storeKey, { token: state.token, taskId: state.taskId, open: state.open, messages: state.messages });
    },
    /** Stores the answer in progress: at once with `now`, else at most every PENDING_SAVE_INTERVAL_MS. */
    savePending(now) {
      if (now || Date.now() - lastPendingSave >= PENDING_SAVE_INTERVAL_MS) writePending();
      else if (!pendingTimer) pendingTimer = setTimeout(writePending, PENDING_SAVE_INTERVAL_MS - (Date.now() - lastPendingSave));
    },
    /** Stores the message this tab is sending (null: its run has started, or it failed). */
    saveSending(sending) {
      state.sending = sending;
      if (sending) write(sendingKey, sending, tabStorage);
      else remove(sendingKey, tabStorage);
    },
    /**
     * Calls `listener()` after another tab changed the shared session's conversation (already
     * applied to `state`): its task or transcript, not only its renewed visitor token.
     */
    onChange(listener) {
      const shown = () => JSON.stringify([state.taskId, state.messages]);
      window.addEventListener("storage", (e) => {
        if (e.key !== storeKey) return;
        const before = shown();
        refresh();
        if (shown() !== before) listener();
      });
    },
  };
}

/** `storage` is a getter: reading `localStorage` itself throws where storage is blocked. */
function read(key, storage = () => localStorage) {
  try {
    const value = JSON.parse(storage().getItem(key) || "null");
    return value && typeof value === "object" && !Array.isArray(value) ? value : null;
  } catch (e) {
    return null; // storage blocked or corrupt: start fresh
  }
}
function write(key, value, storage = () => localStorage) {
  try {
    storage().setItem(key, JSON.stringify(value));
  } catch (e) {
    /* private mode or full: the session lasts the page */
  }
}
function remove(key, storage = () => localStorage) {
  try {
    storage().removeItem(key);
  } catch (e) {
    /* as above */
  }
}

const isText = (v) => typeof v === "string";

/** Whether the visitor token (`v1.<payload, base64url JSON>.<signature>`) says it has expired; false when it cannot be read. */
function tokenExpired(token) {
  try {
    const payload = JSON.parse(atob(token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/")));
    return typeof payload.exp === "number" && payload.exp * 1000 <= Date.now();
  } catch (e) {
    return false;
  }
}

/** The shared fields of a stored session, each checked: what is not as this script writes it is dropped. */
function shared(s) {
  s = s || {};
  const messages = Array.isArray(s.messages) ? s.messages : [];
  return {
    token: isText(s.token) ? s.token : null,
    taskId: isText(s.taskId) ? s.taskId : null,
    open: s.open === true,
    messages: messages.filter((m) => m && typeof m === "object" && ROLES[m.role] === true && isText(m.text)),
  };
}

function validPending(p) {
  return p && typeof p === "object" && isText(p.runId) && isText(p.taskId) && Number.isInteger(p.seq) && isText(p.text) ? p : null;
}

function validSending(s) {
  const fresh = s && typeof s === "object" && isText(s.key) && typeof s.at === "number" && Date.now() - s.at < SENDING_RESUME_MS;
  return fresh && s.body && typeof s.body === "object" && isText(s.body.query) ? s : null;
}
