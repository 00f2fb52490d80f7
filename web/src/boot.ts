// The boot script, inlined into index.html ahead of the module bundle (and
// allowed by its hash in the Content-Security-Policy): a returning user's
// first REST reads start while the bundle is still being fetched, parsed
// and run, and the bundle's API client adopts the answers
// (window.concordBoot). On a channel URL it also paints the channel's
// newest messages from those answers (standin.ts), which the bundle's pane
// then replaces. It must stay small and import nothing heavy: it is on
// every page load's critical path.

import {
  API_BASE,
  BOOT_OFF_KEY,
  bootReads,
  channelOfPath,
  channelPath,
  EARLY_OFF_KEY,
  historyPath,
  PAGE,
  STANDIN_OFF_KEY,
  TOKEN_KEY,
  type BootAnswer,
  type BootReads,
} from "./bootreads";
import { paintStandIn } from "./standin";

try {
  const token = localStorage.getItem(TOKEN_KEY);
  if (token && localStorage.getItem(BOOT_OFF_KEY) !== "off") {
    const boot: BootReads = { token, reads: {} };
    for (const path of bootReads(location.pathname)) {
      const res: Promise<BootAnswer> = fetch(API_BASE + path, { headers: { Authorization: token } }).then((r) =>
        r.text().then((text) => ({ status: r.status, text })),
      );
      // A read nobody adopts (the bundle decided otherwise) must not log an
      // unhandled rejection; the adopter still sees the failure.
      res.catch(() => {});
      boot.reads[path] = res;
    }
    const c = channelOfPath(location.pathname);
    if (c && localStorage.getItem(STANDIN_OFF_KEY) !== "off" && localStorage.getItem(EARLY_OFF_KEY) !== "off") {
      boot.standIn = Promise.all([boot.reads[channelPath(c)], boot.reads[historyPath(c)]]).then(
        ([ch, page]) => {
          // Painted only where a bundle will replace it: one that has not
          // started yet (it adopts these reads when it does), or one that
          // adopted them and waits for this.
          if (ch.status !== 200 || page.status !== 200 || (boot.started && !boot.handover) || !document.body) return false;
          try {
            const msgs = JSON.parse(page.text);
            return paintStandIn(JSON.parse(ch.text), msgs, msgs.length < PAGE);
          } catch {
            return false; // the bundle reports what is wrong with the answer
          }
        },
        () => false,
      );
      boot.standIn.catch(() => {});
    }
    window.concordBoot = boot;
    performance.mark("concord:boot"); // the reads are on their way
  }
} catch {
  // No storage (private mode, blocked): the bundle does the reads.
}
