// The REST reads a page load needs before anything else, shared by the
// inline boot script (boot.ts), which issues them while the main bundle is
// still being fetched and parsed, and by the client, which adopts the
// in-flight responses instead of asking again.

export const API_BASE = "/api/v10";
export const TOKEN_KEY = "concord.token";
// PAGE is the number of messages a history read asks for.
export const PAGE = 50;
// BOOT_OFF_KEY = "off" in localStorage leaves every read to the bundle, as
// before the boot script: the first-paint benchmark's peer.
export const BOOT_OFF_KEY = "concord.bootFetch";

// BootReads is what the boot script leaves on window.concordBoot: the
// token the reads were made with and each read's response by API path.
export interface BootReads {
  token: string;
  reads: Record<string, Promise<Response>>;
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

// bootReads lists the API paths a page at this URL reads first: the
// gateway's URL always, and on a channel's URL the channel and its newest
// page, which paint before the gateway's READY.
export function bootReads(pathname: string): string[] {
  const reads = ["/gateway"];
  const c = channelOfPath(pathname);
  if (c) reads.push(`/channels/${c}`, historyPath(c));
  return reads;
}
