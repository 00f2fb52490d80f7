// The REST reads a page load needs before anything else, shared by the
// inline boot script (boot.ts), which issues them while the main bundle is
// still being fetched and parsed, and by the client, which adopts the
// answers instead of asking again.

export const API_BASE = "/api/v10";
export const TOKEN_KEY = "concord.token";
// PAGE is the number of messages a history read asks for.
export const PAGE = 50;
// BOOT_OFF_KEY = "off" in localStorage leaves every read to the bundle, as
// before the boot script: the first-paint benchmark's peer.
export const BOOT_OFF_KEY = "concord.bootFetch";
// STANDIN_OFF_KEY = "off" keeps the boot script's reads but leaves the
// painting to the bundle (the client before the stand-in list): a peer of
// the first-paint benchmark.
export const STANDIN_OFF_KEY = "concord.bootPaint";
// EARLY_OFF_KEY = "off" makes a channel URL wait for READY before its pane
// renders: the oldest peer of the first-paint benchmark.
export const EARLY_OFF_KEY = "concord.earlyPaint";

// BootAnswer is one boot read's answer, its body already read (the boot
// script reads the history itself to paint it).
export interface BootAnswer {
  status: number;
  text: string;
}

// BootReads is what the boot script leaves on window.concordBoot: the
// token the reads were made with and each read's answer by API path.
export interface BootReads {
  token: string;
  reads: Record<string, Promise<BootAnswer>>;
  // standIn settles once the boot script has painted the URL's channel
  // from its reads (true) or decided not to (false); absent when it will
  // not try.
  standIn?: Promise<boolean>;
  // Set by the bundle when it starts: started, and whether it adopted the
  // history read and will replace a stand-in once that was painted
  // (handover). A stand-in is only painted before the bundle started, or
  // for a bundle that will hand over.
  started?: boolean;
  handover?: boolean;
}

declare global {
  interface Window {
    concordBoot?: BootReads;
  }
}

// channelOfPath is the channel id of a channel URL
// (/channels/<guild or @me>/<channel>), or null.
export function channelOfPath(pathname: string): string | null {
  const m = /^\/channels\/(?:@me|\d+)\/(\d+)\/?$/.exec(pathname);
  return m ? m[1] : null;
}

// historyPath is the API path of a channel's newest page.
export function historyPath(channelId: string): string {
  return `/channels/${channelId}/messages?limit=${PAGE}`;
}

// channelPath is the API path of a channel.
export function channelPath(channelId: string): string {
  return `/channels/${channelId}`;
}

// bootReads lists the API paths a page at this URL reads first: the
// gateway's URL always, and on a channel's URL the channel and its newest
// page, which paint before the gateway's READY.
export function bootReads(pathname: string): string[] {
  const reads = ["/gateway"];
  const c = channelOfPath(pathname);
  if (c) reads.push(channelPath(c), historyPath(c));
  return reads;
}
