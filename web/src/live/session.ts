// The live viewer's model: one stream's comments, reactions, viewers and
// state, fed by the live-comments API (/v1/streams/...).
//
// Delivery is an EventSource on /v1/streams/{id}/live (?token= because an
// EventSource cannot set headers). The browser resumes a dropped stream
// itself, sending Last-Event-ID; when it gives up (the server answered
// with an error, or was down long enough) the session reopens it with
// ?last_event_id= set to the last id seen, so a restart loses nothing and
// repeats nothing. A watchdog switches to polling the store when no event
// has arrived for 20 s: the `: ping` comment lines of a healthy stream are
// invisible to EventSource, but `viewers` events come every few seconds,
// so 20 s of silence means the connection is dead or buffered by a proxy.
//
// After the stream ends the comments replay in step with the recording:
// they are fetched ascending by video_ts_ms and held until the playhead
// reaches each one.

import { describeError } from "../api";

export interface Author {
  id: string;
  username: string;
}

export interface Comment {
  id: string;
  stream_id: string;
  seq: number;
  author: Author;
  text: string;
  video_ts_ms: number;
  created_at: string;
}

export interface Stream {
  id: string;
  creator_id: string;
  title: string;
  state: "live" | "ended";
  started_at: string;
  ended_at: string | null;
  viewers: number;
  sampled: boolean;
  // The stream's video (http or https), when its creator set one.
  stream_url?: string;
  slow_mode_seconds?: number;
  blocked_terms?: string[];
}

// Item is a comment on screen: key stays the same from the optimistic copy
// to the broadcast one, so the row is updated in place, never re-created.
export interface Item {
  key: string;
  c: Comment;
  pending?: boolean;
  error?: string;
  nonce?: string;
}

export type Transport = "connecting" | "live" | "polling" | "replay";

export const WATCHDOG_MS = 20000;
const POLL_MS = 2000;
const REOPEN_MS = 10000;
const BATCH_MS = 2000;
const MAX_ITEMS = 300;
const MAX_BURSTS_PER_S = 20;

// burstsFor maps a second's reaction count to the floating hearts shown:
// log scale (1 → 2, 10 → 5, 100 → 9, 1,000 → 13) capped at 20 a second,
// so a busy stream looks busy without drowning the page.
export function burstsFor(n: number): number {
  if (n <= 0) return 0;
  return Math.min(MAX_BURSTS_PER_S, Math.max(1, Math.round(4 * Math.log10(1 + n) + 0.8)));
}

// userIdFromToken reads the user id from a Concord (Discord-shaped) token:
// its first part is the base64 of the id.
export function userIdFromToken(token: string | null): string | null {
  if (!token) return null;
  const head = token.replace(/^(Bot|Bearer) /, "").split(".")[0];
  try {
    const id = atob(head.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((head.length + 3) % 4));
    return /^\d+$/.test(id) ? id : null;
  } catch {
    return null;
  }
}

export class LiveError extends Error {
  constructor(message: string, public status: number, public code: number, public retryAfter = 0) {
    super(message);
  }
}

// Messages for the live API's codes whose server text needs a person's words.
const liveMessages: Record<number, string> = {
  10090: "This stream does not exist.",
  10091: "That comment is gone.",
  40007: "You are banned from commenting on this stream.",
  190001: "This stream has ended: comments are closed.",
  20016: "Slow mode is on: wait before commenting again.",
};

async function call<T>(method: string, path: string, token: string | null, body?: unknown): Promise<T> {
  const headers: Record<string, string> = {};
  if (token) headers["Authorization"] = token;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let res: Response;
  try {
    res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch {
    throw new LiveError("Cannot reach the server: check your connection.", 0, 0);
  }
  if (res.status === 204) return undefined as T;
  let data: any = null;
  try {
    data = await res.json();
  } catch {
    data = null;
  }
  if (!res.ok) {
    const code = typeof data?.code === "number" ? data.code : 0;
    const retry = Number(data?.retry_after) || Number(res.headers.get("Retry-After")) || 0;
    let msg: string;
    if (res.status === 429) msg = `Slow down: you can comment again in ${Math.max(1, Math.ceil(retry))} s.`;
    else if (data?.reason) msg = `${data.message || "Comment refused"}: ${data.reason}`;
    else msg = liveMessages[code] || describeError(res.status, data).message;
    throw new LiveError(msg, res.status, code, retry);
  }
  return data as T;
}

// createStream starts a stream of the token's user (POST /v1/streams).
export function createStream(token: string | null, title: string, streamURL = ""): Promise<Stream> {
  return call<Stream>("POST", "/v1/streams", token, streamURL ? { title, stream_url: streamURL } : { title });
}

function randomId(): string {
  const b = new Uint8Array(12);
  crypto.getRandomValues(b);
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

export class LiveSession {
  stream: Stream | null = null;
  error = "";
  items: Item[] = [];
  viewers = 0;
  transport: Transport = "connecting";
  // lastId is the last SSE id (a seq) delivered; the resume point.
  lastId = -1;
  me: string | null;
  // bursts: floating hearts to draw; each is removed when its animation ends.
  bursts: { id: number; x: number; own: boolean }[] = [];

  private es: EventSource | null = null;
  private watchdog: number | undefined;
  private pollTimer: number | undefined;
  private reopenTimer: number | undefined;
  private batchTimer: number | undefined;
  private taps = 0;
  // ownShown counts own taps drawn at once and not yet seen in a reactions
  // event, so they are not drawn twice.
  private ownShown = 0;
  private burstSeq = 0;
  private keys = new Map<string, string>(); // comment id → item key
  private stopped = false;
  // Replay: comments fetched ahead of the playhead, ascending by video_ts_ms.
  private held: Comment[] = [];
  private replayNext = -1; // after_video_ts of the next page (exclusive)
  private replayDone = false;
  private replayLoading = false;

  constructor(public id: string, public token: string | null, private changed: () => void) {
    this.me = userIdFromToken(token);
  }

  get isCreator(): boolean {
    return !!this.me && this.stream?.creator_id === this.me;
  }

  // replayProgress is where the replay stands: the playhead last applied
  // (ms), how many fetched comments wait for it, and whether every page
  // has been fetched and none is in flight. The console and the browser
  // tests read it to know that a playhead has been acted on.
  get replayProgress(): { playheadMs: number; held: number; settled: boolean } {
    return { playheadMs: this.playhead, held: this.held.length, settled: this.replayDone && !this.replayLoading };
  }

  get videoURL(): string {
    return this.stream?.stream_url || "";
  }

  async start() {
    try {
      this.stream = await call<Stream>("GET", `/v1/streams/${this.id}`, this.token);
      this.viewers = this.stream.viewers;
    } catch (e) {
      this.error = (e as Error).message;
      this.changed();
      return;
    }
    if (this.stream.state === "ended") this.transport = "replay";
    else this.open();
    this.changed();
  }

  stop() {
    this.stopped = true;
    this.es?.close();
    this.es = null;
    clearTimeout(this.watchdog);
    clearInterval(this.pollTimer);
    clearTimeout(this.reopenTimer);
    clearTimeout(this.batchTimer);
    this.flushTaps();
  }

  // ---- delivery ----

  private liveURL(): string {
    const q = new URLSearchParams();
    if (this.token) q.set("token", this.token);
    if (this.lastId >= 0) q.set("last_event_id", String(this.lastId));
    const s = q.toString();
    return `/v1/streams/${this.id}/live` + (s ? "?" + s : "");
  }

  private open() {
    if (this.stopped || this.stream?.state === "ended") return;
    this.es?.close();
    const es = new EventSource(this.liveURL());
    this.es = es;
    this.arm();
    const on = (type: string, fn: (d: any, ev: MessageEvent) => void) =>
      es.addEventListener(type, (ev) => {
        const me = ev as MessageEvent;
        if (es !== this.es) return;
        this.alive();
        if (me.lastEventId) {
          const n = Number(me.lastEventId);
          if (Number.isFinite(n) && n > this.lastId) this.lastId = n;
        }
        let d: any;
        try {
          d = JSON.parse(me.data);
        } catch {
          return;
        }
        fn(d, me);
        this.changed();
      });
    on("comment", (d) => this.addComment(d));
    on("retract", (d) => this.remove(String(d.comment_id)));
    on("reactions", (d) => this.onReactions(d));
    on("viewers", (d) => (this.viewers = Number(d.count) || 0));
    on("state", (d) => this.onState(d));
    on("gap", () => {
      // The resume point was older than the gateway holds: a fresh
      // snapshot follows; comments on screen stay, merged by id.
    });
    es.onopen = () => {
      if (es !== this.es) return;
      this.alive();
      this.changed();
    };
    es.onerror = () => {
      if (es !== this.es) return;
      if (es.readyState === EventSource.CLOSED) {
        // The browser gave up (an error answer, or the server stayed
        // down): reopen from the last id after a pause.
        this.es = null;
        clearTimeout(this.reopenTimer);
        this.reopenTimer = window.setTimeout(() => this.open(), 1000 + Math.random() * 1000);
      }
      if (this.transport === "live") this.transport = "connecting";
      this.changed();
    };
  }

  // alive records an event: the stream works, polling can stop.
  private alive() {
    if (this.transport !== "live" && this.transport !== "replay") {
      this.transport = "live";
      clearInterval(this.pollTimer);
      this.pollTimer = undefined;
    }
    this.arm();
  }

  private arm() {
    clearTimeout(this.watchdog);
    this.watchdog = window.setTimeout(() => this.fallBack(), WATCHDOG_MS);
  }

  // fallBack polls the store while the event stream is silent, and keeps
  // trying to reopen it.
  private fallBack() {
    if (this.stopped || this.transport === "replay") return;
    this.transport = "polling";
    this.changed();
    this.es?.close();
    this.es = null;
    clearInterval(this.pollTimer);
    this.poll();
    this.pollTimer = window.setInterval(() => this.poll(), POLL_MS);
    clearTimeout(this.reopenTimer);
    this.reopenTimer = window.setTimeout(() => this.open(), REOPEN_MS);
  }

  private async poll() {
    let page: Comment[];
    try {
      page = await call<Comment[]>("GET", `/v1/streams/${this.id}/comments?limit=50`, this.token);
    } catch {
      return;
    }
    if (this.transport !== "polling") return;
    // Newest first. A comment on screen inside the page's seq range that
    // the page lacks was retracted (a short page is the whole stream); one
    // newer than the page's newest may not be stored yet, so it stays.
    if (page.length > 0) {
      const max = page[0].seq;
      const min = page.length < 50 ? -Infinity : page[page.length - 1].seq;
      const have = new Set(page.map((c) => String(c.id)));
      for (const it of [...this.items]) {
        if (!it.pending && it.c.seq >= min && it.c.seq <= max && !have.has(it.c.id)) this.remove(it.c.id);
      }
    }
    for (const c of page.reverse()) this.addComment(c);
    this.changed();
  }

  private onState(d: any) {
    if (!this.stream) return;
    this.stream.state = d.state === "ended" ? "ended" : "live";
    this.stream.sampled = !!d.sampled;
    if (this.stream.state === "ended") {
      this.es?.close();
      this.es = null;
      clearTimeout(this.watchdog);
      clearInterval(this.pollTimer);
      clearTimeout(this.reopenTimer);
      this.transport = "replay";
    }
  }

  // ---- comments ----

  // addComment merges a comment (broadcast, polled, or our own 201) into
  // the list in seq order; a comment already there by id is updated in place.
  addComment(c: Comment) {
    if (!c || !c.id) return;
    c.id = String(c.id);
    const key = this.keys.get(c.id);
    if (key) {
      const it = this.items.find((x) => x.key === key);
      if (it) {
        it.c = c;
        it.pending = false;
        it.error = undefined;
        this.sort();
        return;
      }
    }
    const k = "c" + c.id;
    this.keys.set(c.id, k);
    this.items.push({ key: k, c });
    this.sort();
    this.trim();
  }

  private sort() {
    // Pending comments (no seq yet) stay last, in the order typed.
    this.items.sort((a, b) => (a.pending ? 1 : 0) - (b.pending ? 1 : 0) || (a.pending ? 0 : a.c.seq - b.c.seq));
  }

  private trim() {
    if (this.items.length <= MAX_ITEMS) return;
    const drop = this.items.splice(0, this.items.length - MAX_ITEMS);
    for (const it of drop) this.keys.delete(it.c.id);
  }

  remove(commentId: string) {
    const key = this.keys.get(commentId);
    if (!key) return;
    this.keys.delete(commentId);
    this.items = this.items.filter((x) => x.key !== key);
  }

  // playheadMs is the video time a new comment is stamped with: the
  // player's position when it plays, else the time since the stream began.
  playheadMs(video: HTMLVideoElement | null): number {
    if (video && video.currentSrc && video.currentTime > 0) return Math.round(video.currentTime * 1000);
    const t0 = this.stream ? Date.parse(this.stream.started_at) : NaN;
    return Number.isFinite(t0) ? Math.max(0, Date.now() - t0) : 0;
  }

  // post renders the comment at once and sends it with a nonce; a retry
  // (the Retry button) reuses the nonce, so it never posts twice.
  async post(text: string, videoTs: number, retry?: Item) {
    const nonce = retry?.nonce || randomId();
    let it = retry;
    if (!it) {
      it = {
        key: "n" + nonce,
        nonce,
        pending: true,
        c: {
          id: "pending-" + nonce, stream_id: this.id, seq: Number.MAX_SAFE_INTEGER,
          author: { id: this.me || "", username: "you" }, text, video_ts_ms: videoTs, created_at: new Date().toISOString(),
        },
      };
      this.items.push(it);
      this.sort();
    }
    it.pending = true;
    it.error = undefined;
    this.changed();
    try {
      const c = await call<Comment>("POST", `/v1/streams/${this.id}/comments`, this.token, {
        text: it.c.text, video_ts_ms: it.c.video_ts_ms, nonce,
      });
      c.id = String(c.id);
      // The broadcast copy may have arrived first (as a new row): keep the
      // typed row, drop the other.
      const other = this.keys.get(c.id);
      if (other && other !== it.key) this.items = this.items.filter((x) => x.key !== other);
      this.keys.set(c.id, it.key);
      it.c = c;
      it.pending = false;
      this.sort();
    } catch (e) {
      it.error = (e as Error).message;
      const le = e as LiveError;
      // A refusal (not a lost connection) will not change on retry.
      if (le.status >= 400 && le.status < 500 && le.status !== 429) {
        this.items = this.items.filter((x) => x !== it);
        throw e;
      }
    } finally {
      this.changed();
    }
  }

  discard(it: Item) {
    this.items = this.items.filter((x) => x !== it);
    this.changed();
  }

  // ---- moderation (creator, moderators, and authors for their own) ----

  async retract(commentId: string, reason = "") {
    await call("DELETE", `/v1/streams/${this.id}/comments/${commentId}`, this.token, reason ? { reason } : {});
    this.remove(commentId);
    this.changed();
  }

  async ban(userId: string, removeRecent: boolean) {
    await call("PUT", `/v1/streams/${this.id}/bans/${userId}`, this.token, { remove_recent: removeRecent });
  }

  async unban(userId: string) {
    await call("DELETE", `/v1/streams/${this.id}/bans/${userId}`, this.token);
  }

  async settings(slowModeSeconds: number, blockedTerms: string[], streamURL: string) {
    const s = await call<Stream>("PATCH", `/v1/streams/${this.id}`, this.token, {
      slow_mode_seconds: slowModeSeconds, blocked_terms: blockedTerms, stream_url: streamURL,
    });
    // stream_url is absent once cleared.
    if (this.stream && s) Object.assign(this.stream, { stream_url: undefined }, s);
    this.changed();
  }

  async end() {
    const s = await call<Stream>("POST", `/v1/streams/${this.id}/end`, this.token);
    if (this.stream && s) Object.assign(this.stream, s);
    this.onState({ state: "ended" });
    this.changed();
  }

  // ---- reactions ----

  // tap shows a heart at once and counts it into the next batch.
  tap() {
    this.taps++;
    this.ownShown++;
    this.burst(true);
    if (this.batchTimer === undefined) this.batchTimer = window.setTimeout(() => this.flushTaps(), BATCH_MS);
  }

  private flushTaps() {
    clearTimeout(this.batchTimer);
    this.batchTimer = undefined;
    const n = this.taps;
    if (n === 0 || !this.token) return;
    this.taps = 0;
    const body = { batch_id: randomId(), counts: { heart: n } };
    const send = (tries: number) =>
      call("POST", `/v1/streams/${this.id}/reactions`, this.token, body).catch((e: LiveError) => {
        // The same batch_id is counted once, so a retry is safe.
        if ((e.status === 0 || e.status >= 500) && tries > 0) setTimeout(() => send(tries - 1), 1000);
      });
    send(2);
  }

  private onReactions(d: any) {
    let n = 0;
    for (const v of Object.values(d?.counts || {})) n += Number(v) || 0;
    const mine = Math.min(this.ownShown, n);
    this.ownShown -= mine;
    n -= mine;
    const k = burstsFor(n);
    // Spread the second's hearts over the next second.
    for (let i = 0; i < k; i++) setTimeout(() => this.burst(false), (1000 * i) / k + Math.random() * 80);
  }

  private burst(own: boolean) {
    if (this.bursts.length >= 60) this.bursts.shift();
    this.bursts.push({ id: ++this.burstSeq, x: Math.random(), own });
    this.changed();
  }

  burstDone(id: number) {
    this.bursts = this.bursts.filter((b) => b.id !== id);
    this.changed();
  }

  // ---- replay ----

  // onPlayhead reveals the held comments up to the playhead (ms); a seek
  // backwards, or far ahead, starts over from there.
  onPlayhead(ms: number) {
    if (this.transport !== "replay") return;
    this.playhead = ms;
    const shownTs = this.items.length ? this.items[this.items.length - 1].c.video_ts_ms : -1;
    if (ms < shownTs || (this.held.length === 0 && this.replayDone === false && ms > this.replayNext + 60000)) {
      this.resetReplay(Math.max(-1, ms - 30000));
    }
    let moved = false;
    while (this.held.length && this.held[0].video_ts_ms <= ms) {
      const c = this.held.shift()!;
      if (!this.keys.has(c.id)) {
        this.keys.set(c.id, "c" + c.id);
        this.items.push({ key: "c" + c.id, c });
        moved = true;
      }
    }
    if (moved) {
      this.trim();
      this.changed();
    }
    if (this.held.length < 20 && !this.replayDone) this.fetchReplay();
  }

  private resetReplay(fromMs: number) {
    this.items = [];
    this.keys.clear();
    this.held = [];
    this.replayNext = fromMs;
    this.replayDone = false;
    this.replayGen++;
    this.replayLoading = false;
    this.changed();
  }

  private replayGen = 0;
  private playhead = 0;

  private async fetchReplay() {
    if (this.replayLoading || this.replayDone) return;
    this.replayLoading = true;
    const gen = this.replayGen;
    try {
      const page = await call<Comment[]>(
        "GET", `/v1/streams/${this.id}/comments?after_video_ts=${this.replayNext}&limit=100`, this.token,
      );
      if (gen !== this.replayGen) return;
      const seen = new Set(this.held.map((c) => c.id));
      for (const c of page) {
        c.id = String(c.id);
        if (!seen.has(c.id) && !this.keys.has(c.id)) this.held.push(c);
      }
      this.held.sort((a, b) => a.video_ts_ms - b.video_ts_ms || a.seq - b.seq);
      // A paused player sends no time updates: reveal what is due now.
      queueMicrotask(() => this.onPlayhead(this.playhead));
      if (page.length < 100) this.replayDone = true;
      else {
        // The next page starts a millisecond before this one's last
        // timestamp (the bound is exclusive), so comments sharing it are
        // not skipped; the ids already held drop the repeats.
        const first = page[0].video_ts_ms;
        const last = page[page.length - 1].video_ts_ms;
        this.replayNext = last > first ? last - 1 : last;
      }
    } catch (e) {
      this.error = "Could not load the replay's comments: " + (e as Error).message;
      this.changed();
    } finally {
      if (gen === this.replayGen) this.replayLoading = false;
    }
  }
}
