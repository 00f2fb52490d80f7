// Gateway WebSocket client: HELLO, heartbeats with zombie detection,
// IDENTIFY, and RESUME after a dropped socket (the session's seq and id
// are kept, so missed events are replayed without reloading the page).

import { api } from "./api";

export type ConnState = "connecting" | "connected" | "reconnecting" | "offline";

export interface GatewayEvents {
  dispatch(t: string, d: any): void;
  state(s: ConnState, detail?: string): void;
  // fatal is a close the client must not retry (bad token, bad intents).
  fatal(code: number, reason: string): void;
}

const OP = {
  DISPATCH: 0,
  HEARTBEAT: 1,
  IDENTIFY: 2,
  PRESENCE: 3,
  VOICE_STATE: 4,
  RESUME: 6,
  RECONNECT: 7,
  REQUEST_MEMBERS: 8,
  INVALID_SESSION: 9,
  HELLO: 10,
  HEARTBEAT_ACK: 11,
  LAZY_REQUEST: 14,
} as const;
export { OP };

// Close codes after which reconnecting cannot help.
const FATAL = new Set([4004, 4010, 4011, 4012, 4013, 4014]);
// Close codes after which the session cannot be resumed.
const FRESH = new Set([4007, 4009]);

export class Gateway {
  private ws: WebSocket | null = null;
  private url = "";
  private resumeUrl = "";
  private sessionId: string | null = null;
  private seq: number | null = null;
  private hbTimer: number | undefined;
  private acked = true;
  private retries = 0;
  private stopped = false;
  private reconnectTimer: number | undefined;

  constructor(private token: string, private on: GatewayEvents) {
    window.addEventListener("online", () => this.reconnectNow());
  }

  async start() {
    this.on.state("connecting");
    try {
      const g = await api<{ url: string }>("GET", "/gateway");
      this.url = g.url;
    } catch {
      // Same origin as the page, which is where `concord dev` serves it.
      this.url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/gateway";
    }
    this.open(this.url);
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.reconnectTimer);
    this.stopHeartbeat();
    this.ws?.close(1000, "logout");
    this.ws = null;
  }

  send(op: number, d: unknown): boolean {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) return false;
    this.ws.send(JSON.stringify({ op, d }));
    return true;
  }

  // drop closes the socket as a network failure would (the session stays
  // resumable); tests and the "Reconnect" control use it.
  drop() {
    this.ws?.close(4000, "client drop");
  }

  get resumable(): boolean {
    return this.sessionId !== null;
  }

  private open(url: string) {
    const u = url + (url.includes("?") ? "&" : "?") + "v=10&encoding=json";
    const ws = new WebSocket(u);
    this.ws = ws;
    ws.onmessage = (ev) => {
      if (this.ws !== ws) return;
      let f: any;
      try {
        f = JSON.parse(ev.data);
      } catch {
        return;
      }
      this.frame(f);
    };
    ws.onclose = (ev) => {
      if (this.ws !== ws) return;
      this.ws = null;
      this.stopHeartbeat();
      if (this.stopped) return;
      if (FATAL.has(ev.code)) {
        this.stopped = true;
        this.on.fatal(ev.code, ev.reason);
        return;
      }
      if (FRESH.has(ev.code)) {
        this.sessionId = null;
        this.seq = null;
      }
      this.scheduleReconnect();
    };
  }

  private frame(f: { op: number; d: any; s?: number | null; t?: string | null }) {
    switch (f.op) {
      case OP.HELLO:
        this.startHeartbeat(f.d?.heartbeat_interval ?? 41250);
        if (this.sessionId !== null) {
          this.send(OP.RESUME, { token: this.token, session_id: this.sessionId, seq: this.seq });
        } else {
          this.send(OP.IDENTIFY, {
            token: this.token,
            properties: { os: navigator.platform || "web", browser: "Concord Web", device: "" },
            presence: { status: "online", since: 0, activities: [], afk: false },
            compress: false,
          });
        }
        break;
      case OP.HEARTBEAT_ACK:
        this.acked = true;
        break;
      case OP.HEARTBEAT:
        this.send(OP.HEARTBEAT, this.seq);
        break;
      case OP.RECONNECT:
        this.ws?.close(4000, "server asked to reconnect");
        break;
      case OP.INVALID_SESSION:
        if (!f.d) {
          this.sessionId = null;
          this.seq = null;
        }
        // Discord asks for a pause of 1–5 s before identifying again.
        this.retries = Math.max(this.retries, 2);
        this.ws?.close(4000, "invalid session");
        break;
      case OP.DISPATCH:
        if (typeof f.s === "number") this.seq = f.s;
        if (f.t === "READY") {
          this.sessionId = f.d.session_id;
          this.resumeUrl = f.d.resume_gateway_url || "";
        }
        if (f.t === "READY" || f.t === "RESUMED") {
          this.retries = 0;
          this.on.state("connected");
        }
        if (f.t) this.on.dispatch(f.t, f.d);
        break;
    }
  }

  private startHeartbeat(interval: number) {
    this.stopHeartbeat();
    this.acked = true;
    const beat = () => {
      if (!this.acked) {
        // No ACK since the last beat: the connection is a zombie.
        this.ws?.close(4000, "heartbeat not acknowledged");
        return;
      }
      this.acked = false;
      this.send(OP.HEARTBEAT, this.seq);
      this.hbTimer = window.setTimeout(beat, interval);
    };
    this.hbTimer = window.setTimeout(beat, interval * Math.random());
  }

  private stopHeartbeat() {
    clearTimeout(this.hbTimer);
    this.hbTimer = undefined;
  }

  private scheduleReconnect() {
    this.on.state("reconnecting");
    const delay = this.retries === 0 ? 250 : Math.min(30000, 1000 * 2 ** (this.retries - 1)) * (0.5 + Math.random());
    this.retries++;
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = window.setTimeout(() => this.reconnectNow(), delay);
  }

  private reconnectNow() {
    if (this.stopped || this.ws) return;
    clearTimeout(this.reconnectTimer);
    this.open(this.sessionId !== null && this.resumeUrl ? this.resumeUrl : this.url);
  }
}
