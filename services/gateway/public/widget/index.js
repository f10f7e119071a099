/*
 * agentrun chat widget. Embed with one tag:
 *   <script src="https://GATEWAY/widget.js" data-widget-key="pk_…" async></script>
 * Optional attributes: data-title, data-greeting, data-color (any CSS color).
 * Renders in a shadow root, talks to the gateway's widget API, and keeps the visitor's session and
 * any answer in progress in localStorage, so an answer interrupted by a page reload is picked up
 * again where it stopped (Last-Event-ID). The gateway bundles this folder into /widget.js.
 */
import { readConfig } from "./config.js";
import { openSession } from "./session.js";
import { createPanel } from "./panel.js";
import { createConversation } from "./conversation.js";

const config = readConfig();
// Loaded twice with one key (a theme and a tag manager, say): the first copy is the widget.
const loaded = config && Symbol.for("agentrun-widget:" + config.key);
if (config && !window[loaded]) {
  window[loaded] = true;
  const session = openSession(config.key);
  let conversation = null;
  const panel = createPanel(config, {
    onOpenChange(open) {
      if (session.state.open !== open) session.update((s) => (s.open = open));
    },
    onSubmit: (text) => void conversation.send(text),
    onStop: () => void conversation.stop(),
  });
  conversation = createConversation(config, session, panel);

  const mount = () => {
    document.body.appendChild(panel.host);
    conversation.restore();
    if (session.state.open) panel.setOpen(true, false);
  };
  if (document.body) mount();
  else document.addEventListener("DOMContentLoaded", mount);
}
