// REST client for Concord's Discord-compatible API (/api/v10). Every
// failure becomes an ApiError whose message is a sentence a person can act
// on; the raw Discord error (code, field errors) stays available for code
// that needs it.

import { API_BASE, type BootAnswer } from "./bootreads";

export { API_BASE };

export class ApiError extends Error {
  status: number;
  code: number;
  retryAfter: number;
  constructor(message: string, status: number, code = 0, retryAfter = 0) {
    super(message);
    this.status = status;
    this.code = code;
    this.retryAfter = retryAfter;
  }
  // transient errors are worth retrying with the same request (and nonce).
  get transient(): boolean {
    return this.status === 0 || this.status >= 500 || this.status === 429;
  }
}

let token: string | null = null;
let onUnauthorized: () => void = () => {};

export function setToken(t: string | null) {
  token = t;
}

export function setUnauthorizedHandler(fn: () => void) {
  onUnauthorized = fn;
}

// Messages for Discord JSON error codes whose server text is terse.
const codeMessages: Record<number, string> = {
  10003: "That channel does not exist (any more).",
  10004: "That server does not exist (any more).",
  10006: "That invite is invalid or has expired.",
  10008: "That message does not exist (any more).",
  10013: "That user does not exist.",
  20028: "Slow mode is on in this channel: wait a moment before sending again.",
  30001: "You have joined too many servers.",
  40001: "You need to log in again.",
  50001: "You do not have access to that channel.",
  50006: "A message cannot be empty.",
  50013: "You do not have permission to do that here.",
  50035: "Some fields are invalid.",
};

// fieldErrors flattens Discord's nested {"errors": {"field": {"_errors":
// [{"message"}]}}} into "field: message" lines.
function fieldErrors(errs: any, prefix = ""): string[] {
  if (!errs || typeof errs !== "object") return [];
  const out: string[] = [];
  for (const [k, v] of Object.entries(errs)) {
    if (k === "_errors" && Array.isArray(v)) {
      for (const e of v as any[]) out.push((prefix ? prefix + ": " : "") + (e.message || e.code));
    } else {
      out.push(...fieldErrors(v, prefix ? prefix + "." + k : k));
    }
  }
  return out;
}

export function describeError(status: number, body: any): ApiError {
  const code = typeof body?.code === "number" ? body.code : 0;
  const retryAfter = Number(body?.retry_after) || 0;
  if (status === 401) return new ApiError("Your session has ended: log in again.", status, code);
  if (status === 429) {
    const s = Math.max(1, Math.ceil(retryAfter));
    return new ApiError(`You are doing that too fast: try again in ${s} s.`, status, code, retryAfter);
  }
  const fields = fieldErrors(body?.errors);
  if (fields.length > 0) return new ApiError(fields.join("\n"), status, code);
  const known = codeMessages[code];
  if (known) return new ApiError(known, status, code);
  if (status >= 500) return new ApiError(`The server could not do that right now (${status}); try again.`, status, code);
  const msg = typeof body?.message === "string" && body.message ? body.message : `Request failed (${status}).`;
  return new ApiError(msg, status, code);
}

// adoptBootRead returns the boot script's answer to this GET, once, if
// it was made with the current token.
function adoptBootRead(method: string, path: string): Promise<BootAnswer> | undefined {
  const boot = window.concordBoot;
  if (method !== "GET" || !boot || !token || boot.token !== token) return undefined;
  const res = boot.reads[path];
  delete boot.reads[path];
  return res;
}

// dropBootReads forgets the boot script's reads nobody adopted: after the
// boot they would be stale answers.
export function dropBootReads() {
  delete window.concordBoot;
}

export async function api<T = any>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = {};
  if (token) headers["Authorization"] = token;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let status: number;
  let text: string;
  try {
    const adopted = adoptBootRead(method, path);
    if (adopted) {
      ({ status, text } = await adopted);
    } else {
      const res = await fetch(API_BASE + path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      status = res.status;
      text = status === 204 ? "" : await res.text();
    }
  } catch {
    throw new ApiError("Cannot reach the server: check your connection and try again.", 0);
  }
  if (status === 204) return undefined as T;
  let data: any = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = null;
    }
  }
  if (status < 200 || status > 299) {
    const err = describeError(status, data);
    if (status === 401 && token) onUnauthorized();
    throw err;
  }
  return data as T;
}

// newNonce returns a snowflake-shaped nonce (what Discord clients send),
// unique per send, reused on every retry of that send.
let nonceSeq = 0;
export function newNonce(): string {
  const ms = BigInt(Date.now() - 1420070400000);
  nonceSeq = (nonceSeq + 1) & 0xfff;
  const rnd = BigInt(Math.floor(Math.random() * 1024));
  return ((ms << 22n) | (rnd << 12n) | BigInt(nonceSeq)).toString();
}
