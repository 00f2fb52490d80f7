// The live viewer page, /live/<stream id>: public (anyone may watch;
// commenting needs a login).
import { h } from "preact";
import { linkClick } from "../router";
import { registerPanel, registerRoute } from "../seams";
import { LivePage } from "./LivePage";

registerRoute({ prefix: "live", view: LivePage, public: true });

// A way in from the chat client: start a stream.
registerPanel(function GoLiveLink() {
  return (
    <a class="go-live" href="/live" onClick={linkClick}>
      Go Live
    </a>
  );
});
