/**
 * The widget's settings, read from its own <script> tag while that script runs:
 *   <script src="https://GATEWAY/widget.js" data-widget-key="pk_…" async></script>
 * Optional attributes: data-title, data-greeting, data-color (any CSS color).
 * Null (with a console warning) when the tag has no widget key.
 */
export function readConfig() {
  const script = document.currentScript || document.querySelector("script[data-widget-key]");
  const key = script && script.getAttribute("data-widget-key");
  if (!key) {
    console.warn("agentrun widget: data-widget-key is missing");
    return null;
  }
  return {
    key,
    // The gateway that served the script: the widget API is on the same origin and path prefix.
    base: new URL(".", script.src).href.replace(/\/$/, ""),
    title: script.getAttribute("data-title") || "Assistant",
    greeting: script.getAttribute("data-greeting") || "Hi! How can I help you today?",
    color: script.getAttribute("data-color"),
  };
}

/** What the visitor is told when an answer cannot be given. */
export const TEXT = {
  credits: "This assistant is out of credits right now. Please try again later.",
  limited: "You're sending messages a little too fast. Please wait a moment and try again.",
  busy: "The previous answer is still being written. Please wait for it to finish.",
  failed: "Sorry, something went wrong while answering. Please try again.",
  failedPartway: "Something went wrong before this answer was finished. Please try again.",
  network: "Can't reach the assistant right now. Please check your connection and try again.",
  generic: "Sorry, the assistant is unavailable right now.",
  cancelled: "This answer was stopped.",
  noAnswer: "Sorry, no answer came back. Please try again, or put your message another way.",
  cutShort: "This answer was cut short: it reached the length the assistant may write.",
  filtered: "The rest of this answer was withheld by a content filter.",
};
