// The live viewer page, /live/<stream id>: public (anyone may watch;
// commenting needs a login).
import { registerRoute } from "../seams";
import { LivePage } from "./LivePage";

registerRoute({ prefix: "live", view: LivePage, public: true });
