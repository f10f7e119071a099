/** How many messages of the transcript the browser keeps. */
const MAX_STORED_MESSAGES = 50;

/**
 * The visitor's session in localStorage, one entry per widget key: the visitor token, the task,
 * whether the panel is open, the transcript, and the answer in progress (`pending`: its run,
 * task, last seq and text so far), so a page reload resumes the answer where it stopped.
 * Storage that is blocked or full leaves a session that lasts the page.
 */
export function openSession(widgetKey) {
  const storeKey = "agentrun-widget:" + widgetKey;
  const state = load(storeKey);
  return {
    state,
    save() {
      state.messages = state.messages.slice(-MAX_STORED_MESSAGES);
      try {
        localStorage.setItem(storeKey, JSON.stringify(state));
      } catch (e) {
        /* private mode: the session lasts the page */
      }
    },
  };
}

function load(storeKey) {
  try {
    const s = JSON.parse(localStorage.getItem(storeKey) || "null");
    if (s && typeof s === "object") {
      return { token: s.token || null, taskId: s.taskId || null, open: !!s.open, messages: Array.isArray(s.messages) ? s.messages : [], pending: s.pending || null };
    }
  } catch (e) {
    /* storage blocked or corrupt: start fresh */
  }
  return { token: null, taskId: null, open: false, messages: [], pending: null };
}
