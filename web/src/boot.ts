// The boot script, inlined into index.html ahead of the module bundle (and
// allowed by its hash in the Content-Security-Policy): a returning user's
// first REST reads start while the bundle is still being fetched, parsed
// and run, and the bundle's API client adopts the responses
// (window.concordBoot). It must stay tiny and import nothing heavy: it is
// on every page load's critical path.

import { API_BASE, BOOT_OFF_KEY, bootReads, TOKEN_KEY, type BootReads } from "./bootreads";

try {
  const token = localStorage.getItem(TOKEN_KEY);
  if (token && localStorage.getItem(BOOT_OFF_KEY) !== "off") {
    const boot: BootReads = { token, reads: {} };
    for (const path of bootReads(location.pathname)) {
      const res = fetch(API_BASE + path, { headers: { Authorization: token } });
      // A read nobody adopts (the bundle decided otherwise) must not log an
      // unhandled rejection; the adopter still sees the failure.
      res.catch(() => {});
      boot.reads[path] = res;
    }
    window.concordBoot = boot;
    performance.mark("concord:boot"); // the reads are on their way
  }
} catch {
  // No storage (private mode, blocked): the bundle does the reads.
}
