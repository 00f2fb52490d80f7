// Voice: joining a voice channel the way Discord's web client does.
//
//  1. op 4 (voice state update) on the chat gateway with the channel;
//  2. the gateway answers VOICE_STATE_UPDATE (our session_id) and
//     VOICE_SERVER_UPDATE (token, endpoint);
//  3. the voice gateway (wss://<endpoint>/?v=8): Hello, Identify, Ready;
//  4. select protocol "webrtc" with our offer SDP (ICE gathered, no
//     trickle); the session description carries the server's answer;
//  5. media flows over the peer connection. The server gives each remote
//     speaker one of our receive slots and names the slot's SSRC's user
//     with op 5, which is how speaking indicators find their user.
//
// A new VOICE_SERVER_UPDATE while connected (the voice server failed over,
// or the region changed) moves the call to the new endpoint; a dropped
// voice socket is resumed (op 7), and re-identified when the session is
// gone.

import { gateway } from "../client";
import { OP } from "../gateway";
import { state } from "../state";

export type VoicePhase = "idle" | "joining" | "connecting" | "connected" | "reconnecting";

const V_IDENTIFY = 0;
const V_SELECT = 1;
const V_READY = 2;
const V_HEARTBEAT = 3;
const V_DESCRIPTION = 4;
const V_SPEAKING = 5;
const V_HEARTBEAT_ACK = 6;
const V_RESUME = 7;
const V_HELLO = 8;
const V_RESUMED = 9;
const V_CLIENTS_CONNECT = 11;
const V_CLIENT_DISCONNECT = 13;

// Receive slots offered to the server: one per other speaker heard at once.
const RECV_SLOTS = 8;
// Close codes after which the voice session cannot be resumed.
const NO_RESUME = new Set([4004, 4006, 4009, 4011, 4012, 4014, 4016]);
// Close codes no retry can fix, with what the person is told.
const FATAL: Record<number, string> = {
  4004: "The voice server refused this session (authentication failed).",
  4011: "The voice channel is full or its server is gone.",
  4012: "The voice server does not offer a protocol this browser speaks (webrtc).",
  4016: "The voice server does not offer a supported encryption mode.",
};
const SPEAKING_LEVEL = 0.01;

export interface VoiceUser {
  channelId: string;
  sessionId?: string;
  selfMute: boolean;
  selfDeaf: boolean;
}

export class VoiceClient {
  phase: VoicePhase = "idle";
  guildId: string | null = null;
  channelId: string | null = null;
  error = "";
  muted = false;
  deafened = false;
  endpoint = "";
  // speaking: users heard in the last moments (and "me" when we talk).
  speaking = new Set<string>();
  // states: every user's voice channel per guild, from the chat gateway.
  states = new Map<string, Map<string, VoiceUser>>();

  private sessionId = "";
  private token = "";
  private ws: WebSocket | null = null;
  private pc: RTCPeerConnection | null = null;
  // iceServers are the STUN/TURN servers the voice server's Ready names
  // (ice_servers): behind a NAT or a firewall blocking UDP to the SFU, the
  // call relays through TURN.
  private iceServers: RTCIceServer[] = [];
  private mic: MediaStream | null = null;
  private ssrc = 0;
  private ssrcUser = new Map<number, string>();
  private audios = new Set<HTMLAudioElement>();
  private hbTimer: number | undefined;
  private hbNonce = 0;
  private seqAck = -1;
  private statsTimer: number | undefined;
  private retryTimer: number | undefined;
  private retries = 0;
  private selfSpeaking = false;
  private lastHeard = new Map<string, number>();
  private connectedOnce = false;
  // lastClose is the voice socket's last close code and reason.
  lastClose = "";
  // identified: Ready arrived on the current voice session (resumable).
  private identified = false;

  constructor(private changed: () => void) {}

  // ---- chat gateway side ----

  onDispatch(t: string, d: any) {
    switch (t) {
      case "READY":
        this.states.clear();
        // A fresh chat session forgot our voice state: ask again.
        if (this.channelId && this.phase !== "idle") this.sendState();
        break;
      case "GUILD_CREATE":
        if (!d.unavailable) {
          const m = new Map<string, VoiceUser>();
          for (const vs of d.voice_states || []) {
            if (vs.member?.user) state.putUser(vs.member.user);
            if (vs.channel_id) m.set(vs.user_id, toUser(vs));
          }
          this.states.set(d.id, m);
        }
        break;
      case "GUILD_DELETE":
        this.states.delete(d.id);
        if (d.id === this.guildId) this.teardown("");
        break;
      case "VOICE_STATE_UPDATE": {
        const g = d.guild_id;
        if (!g) break;
        if (d.member?.user) state.putUser(d.member.user);
        let m = this.states.get(g);
        if (!m) this.states.set(g, (m = new Map()));
        if (d.channel_id) m.set(d.user_id, toUser(d));
        else m.delete(d.user_id);
        if (d.user_id === state.me?.id && g === this.guildId) {
          if (!d.channel_id) {
            // Moved out (kicked, or left from another device).
            if (this.phase !== "idle" && this.phase !== "joining") this.teardown("You were disconnected from voice.");
          } else {
            this.channelId = d.channel_id;
            if (d.session_id) this.sessionId = d.session_id;
            this.maybeConnect();
          }
        }
        break;
      }
      case "VOICE_SERVER_UPDATE": {
        if (d.guild_id !== this.guildId || this.phase === "idle") break;
        if (!d.endpoint) {
          // Discord's "no server yet": a new update follows.
          this.phase = "reconnecting";
          this.closeMedia();
          break;
        }
        const moved = this.phase === "connected" || this.phase === "reconnecting" || !!this.ws;
        this.token = d.token;
        this.endpoint = d.endpoint;
        if (moved) {
          // Failover: the old server is gone or draining; start over there.
          this.closeMedia();
          this.phase = "reconnecting";
        }
        this.maybeConnect();
        break;
      }
    }
  }

  participants(guildId: string, channelId: string): { id: string; u: VoiceUser }[] {
    const m = this.states.get(guildId);
    if (!m) return [];
    return [...m].filter(([, u]) => u.channelId === channelId).map(([id, u]) => ({ id, u }));
  }

  // ---- actions ----

  async join(guildId: string, channelId: string) {
    if (this.phase !== "idle") this.leave();
    this.error = "";
    this.guildId = guildId;
    this.channelId = channelId;
    this.phase = "joining";
    this.sessionId = "";
    this.token = "";
    this.endpoint = "";
    this.connectedOnce = false;
    this.changed();
    try {
      this.mic = await navigator.mediaDevices.getUserMedia({ audio: { echoCancellation: true, noiseSuppression: true } });
    } catch (e) {
      this.teardown("Concord needs your microphone for voice: " + ((e as Error).message || "permission denied") + ".");
      return;
    }
    this.applyMute();
    if (!this.sendState()) {
      this.teardown("Not connected to Concord: try again when the connection is back.");
      return;
    }
    this.changed();
  }

  leave() {
    if (this.phase === "idle") return;
    const g = this.guildId;
    this.teardown("");
    if (g) gateway()?.send(OP.VOICE_STATE, { guild_id: g, channel_id: null, self_mute: false, self_deaf: false });
  }

  toggleMute() {
    this.muted = !this.muted;
    if (!this.muted && this.deafened) this.deafened = false;
    this.applyMute();
    this.sendState();
    this.changed();
  }

  toggleDeafen() {
    this.deafened = !this.deafened;
    // Deafening mutes too, as in Discord; undeafening restores both.
    this.muted = this.deafened;
    this.applyMute();
    this.sendState();
    this.changed();
  }

  // stats sums the inbound and outbound RTP packets (the tests watch them).
  async stats(): Promise<{ inbound: number; outbound: number; inboundBySsrc: Record<string, number> }> {
    const out = { inbound: 0, outbound: 0, inboundBySsrc: {} as Record<string, number> };
    if (!this.pc) return out;
    const r = await this.pc.getStats();
    r.forEach((s: any) => {
      if (s.type === "inbound-rtp" && s.kind === "audio") {
        out.inbound += s.packetsReceived || 0;
        out.inboundBySsrc[String(s.ssrc)] = s.packetsReceived || 0;
      }
      if (s.type === "outbound-rtp" && s.kind === "audio") out.outbound += s.packetsSent || 0;
    });
    return out;
  }

  // ---- internals ----

  private sendState(): boolean {
    if (!this.guildId || !this.channelId) return false;
    return !!gateway()?.send(OP.VOICE_STATE, {
      guild_id: this.guildId, channel_id: this.channelId, self_mute: this.muted, self_deaf: this.deafened,
    });
  }

  private applyMute() {
    for (const t of this.mic?.getAudioTracks() || []) t.enabled = !this.muted;
    for (const a of this.audios) a.muted = this.deafened;
    if (this.muted) this.setSelfSpeaking(false);
  }

  private maybeConnect() {
    if (this.ws || !this.sessionId || !this.token || !this.endpoint || !this.mic) return;
    if (this.phase === "joining") this.phase = "connecting";
    this.open(false);
    this.changed();
  }

  private url(): string {
    let e = this.endpoint;
    if (!/^wss?:\/\//.test(e)) e = "wss://" + e;
    e = e.replace(/\/+$/, "");
    return e + "/?v=8";
  }

  private open(resume: boolean) {
    const ws = new WebSocket(this.url());
    this.ws = ws;
    ws.onmessage = (ev) => {
      if (ws !== this.ws || typeof ev.data !== "string") return;
      let f: any;
      try {
        f = JSON.parse(ev.data);
      } catch {
        return;
      }
      if (typeof f.seq === "number") this.seqAck = f.seq;
      this.onVoice(f.op, f.d, resume).catch((e) => this.fail(e));
    };
    ws.onclose = (ev) => {
      if (ws !== this.ws) return;
      this.ws = null;
      this.lastClose = `${ev.code} ${ev.reason}`.trim();
      clearInterval(this.hbTimer);
      if (this.phase === "idle") return;
      const fatal = FATAL[ev.code];
      if (fatal) {
        this.leave();
        this.error = fatal;
        this.changed();
        return;
      }
      this.phase = "reconnecting";
      this.changed();
      if (ev.code === 4014) {
        // Disconnected by the server (moved, kicked, channel deleted):
        // the chat gateway says what next (a new VOICE_SERVER_UPDATE, or
        // a voice state without a channel).
        this.closeMedia();
        return;
      }
      const canResume = this.identified && !NO_RESUME.has(ev.code) && !!this.pc && this.pc.connectionState !== "failed";
      const delay = Math.min(10000, 500 * 2 ** this.retries++) * (0.5 + Math.random());
      clearTimeout(this.retryTimer);
      if (canResume) {
        this.retryTimer = window.setTimeout(() => {
          if (this.phase !== "idle" && !this.ws) this.open(true);
        }, delay);
      } else {
        this.rejoin(delay);
      }
    };
  }

  // rejoin starts the call over with a fresh voice token: a token admits
  // one identify, so the same op 4 is sent again and the gateway answers
  // with a new VOICE_SERVER_UPDATE (the call's current server).
  private rejoin(delay: number) {
    this.closeMedia();
    this.token = "";
    clearTimeout(this.retryTimer);
    this.retryTimer = window.setTimeout(() => {
      if (this.phase === "idle") return;
      if (!this.sendState()) this.rejoin(Math.min(10000, delay * 2));
    }, delay);
  }

  private sendVoice(op: number, d: unknown) {
    if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify({ op, d }));
  }

  private async onVoice(op: number, d: any, resume: boolean) {
    switch (op) {
      case V_HELLO: {
        const iv = Math.max(1000, Number(d?.heartbeat_interval) || 13750);
        clearInterval(this.hbTimer);
        this.hbTimer = window.setInterval(() => {
          this.sendVoice(V_HEARTBEAT, { t: ++this.hbNonce, seq_ack: this.seqAck });
        }, iv);
        if (resume) {
          this.sendVoice(V_RESUME, { server_id: this.guildId, session_id: this.sessionId, token: this.token, seq_ack: this.seqAck });
        } else {
          this.sendVoice(V_IDENTIFY, {
            server_id: this.guildId, user_id: state.me?.id, session_id: this.sessionId, token: this.token,
            max_dave_protocol_version: 0,
          });
        }
        break;
      }
      case V_READY:
        this.identified = true;
        this.ssrc = d.ssrc;
        this.iceServers = Array.isArray(d.ice_servers) ? d.ice_servers : [];
        await this.offer();
        break;
      case V_RESUMED:
        this.retries = 0;
        if (this.pc?.connectionState === "connected") this.phase = "connected";
        this.changed();
        break;
      case V_DESCRIPTION:
        if (!this.pc || typeof d?.sdp !== "string") throw new Error("the voice server sent no answer");
        await this.pc.setRemoteDescription({ type: "answer", sdp: d.sdp });
        break;
      case V_SPEAKING:
        if (d?.user_id && typeof d.ssrc === "number") this.ssrcUser.set(d.ssrc, String(d.user_id));
        break;
      case V_CLIENTS_CONNECT:
      case V_HEARTBEAT_ACK:
        break;
      case V_CLIENT_DISCONNECT:
        if (d?.user_id) {
          for (const [ssrc, u] of this.ssrcUser) if (u === String(d.user_id)) this.ssrcUser.delete(ssrc);
          this.speaking.delete(String(d.user_id));
          this.changed();
        }
        break;
    }
  }

  // offer builds the peer connection: our microphone on a send-and-receive
  // audio line, and receive-only lines the server fills with speakers.
  private async offer() {
    this.pc?.close();
    const pc = new RTCPeerConnection({ bundlePolicy: "max-bundle", rtcpMuxPolicy: "require", iceServers: this.iceServers });
    this.pc = pc;
    for (const t of this.mic!.getAudioTracks()) pc.addTransceiver(t, { direction: "sendrecv", streams: [this.mic!] });
    for (let i = 1; i < RECV_SLOTS; i++) pc.addTransceiver("audio", { direction: "recvonly" });
    pc.ontrack = (ev) => {
      const a = new Audio();
      a.autoplay = true;
      a.muted = this.deafened;
      a.srcObject = ev.streams[0] || new MediaStream([ev.track]);
      this.audios.add(a);
      a.play().catch(() => {
        // Autoplay refused until the next click: the join click usually
        // counts, so this is rare.
      });
    };
    pc.onconnectionstatechange = () => {
      if (pc !== this.pc) return;
      const s = pc.connectionState;
      if (s === "connected") {
        this.phase = "connected";
        this.retries = 0;
        this.connectedOnce = true;
        this.watchStats();
      } else if (s === "failed") {
        // Media cannot flow: start over with a new session and offer.
        this.phase = "reconnecting";
        this.rejoin(500);
      } else if (s === "disconnected" && this.phase === "connected") {
        this.phase = "reconnecting";
      }
      this.changed();
    };
    const offer = await pc.createOffer();
    await pc.setLocalDescription(offer);
    await gathered(pc);
    const sdp = pc.localDescription!.sdp;
    this.sendVoice(V_SELECT, {
      protocol: "webrtc",
      data: sdp,
      sdp,
      codecs: [{ name: "opus", type: "audio", priority: 1000, payload_type: 111, rtx_payload_type: null }],
    });
  }

  // watchStats turns audio levels into speaking indicators, five times a
  // second, and tells the server when we start and stop talking (op 5).
  private watchStats() {
    clearInterval(this.statsTimer);
    this.statsTimer = window.setInterval(async () => {
      const pc = this.pc;
      if (!pc) return;
      const now = Date.now();
      let mine = 0;
      const r = await pc.getStats();
      r.forEach((s: any) => {
        if (s.type === "inbound-rtp" && s.kind === "audio" && (s.audioLevel || 0) > SPEAKING_LEVEL) {
          const u = this.ssrcUser.get(s.ssrc);
          if (u) this.lastHeard.set(u, now);
        }
        if (s.type === "media-source" && s.kind === "audio") mine = s.audioLevel || 0;
      });
      this.setSelfSpeaking(!this.muted && mine > SPEAKING_LEVEL);
      const next = new Set<string>();
      for (const [u, t] of this.lastHeard) if (now - t < 400) next.add(u);
      if (this.selfSpeaking && state.me) next.add(state.me.id);
      if (!sameSet(next, this.speaking)) {
        this.speaking = next;
        this.changed();
      }
    }, 200);
  }

  private setSelfSpeaking(on: boolean) {
    if (on === this.selfSpeaking) return;
    this.selfSpeaking = on;
    this.sendVoice(V_SPEAKING, { speaking: on ? 1 : 0, delay: 0, ssrc: this.ssrc });
  }

  private fail(e: unknown) {
    this.error = "Voice failed: " + ((e as Error)?.message || String(e));
    this.changed();
  }

  // closeMedia ends the voice socket and peer connection, keeping the
  // microphone for the next server.
  private closeMedia() {
    clearInterval(this.hbTimer);
    clearInterval(this.statsTimer);
    clearTimeout(this.retryTimer);
    const ws = this.ws;
    this.ws = null;
    ws?.close(1000, "leaving");
    this.identified = false;
    this.pc?.close();
    this.pc = null;
    for (const a of this.audios) a.srcObject = null;
    this.audios.clear();
    this.ssrcUser.clear();
    this.lastHeard.clear();
    this.speaking = new Set();
    this.selfSpeaking = false;
  }

  private teardown(error: string) {
    this.closeMedia();
    for (const t of this.mic?.getTracks() || []) t.stop();
    this.mic = null;
    this.phase = "idle";
    this.guildId = null;
    this.channelId = null;
    this.error = error;
    this.changed();
  }

  get everConnected(): boolean {
    return this.connectedOnce;
  }
}

function toUser(vs: any): VoiceUser {
  return { channelId: vs.channel_id, sessionId: vs.session_id, selfMute: !!vs.self_mute, selfDeaf: !!vs.self_deaf };
}

function sameSet(a: Set<string>, b: Set<string>): boolean {
  if (a.size !== b.size) return false;
  for (const x of a) if (!b.has(x)) return false;
  return true;
}

// gathered resolves when ICE gathering is complete (or after 3 s, with
// what was gathered: host candidates come first and suffice on a LAN).
function gathered(pc: RTCPeerConnection): Promise<void> {
  if (pc.iceGatheringState === "complete") return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      pc.removeEventListener("icegatheringstatechange", check);
      clearTimeout(timer);
      resolve();
    };
    const check = () => {
      if (pc.iceGatheringState === "complete") done();
    };
    const timer = setTimeout(done, 3000);
    pc.addEventListener("icegatheringstatechange", check);
  });
}
