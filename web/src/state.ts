// The client's state, fed by gateway dispatches and REST answers. One
// mutable object; every change calls changed(), which re-renders the app
// once per microtask however many events arrived.

import type { Channel, Guild, Member, Message, Role, User } from "./types";
import { ChannelType, compareIds, isThread } from "./types";

export interface GuildState extends Guild {
  channelIds: Set<string>;
  members: Map<string, Member>;
}

export interface MessageLog {
  items: Message[]; // ascending by id
  // reachedStart: no older messages exist; atEnd: the newest page is loaded
  // (live messages are appended only then).
  reachedStart: boolean;
  atEnd: boolean;
  loading: boolean;
  error?: string;
}

export interface ReadState {
  last_message_id: string;
  mention_count: number;
}

export interface MemberListItem {
  group?: { id: string; count: number };
  member?: Member & { presence?: { status: string } };
}

export interface MemberList {
  id: string;
  groups: { id: string; count: number }[];
  items: (MemberListItem | undefined)[];
  memberCount: number;
  onlineCount: number;
}

export interface Toast {
  id: number;
  text: string;
}

export class State {
  me: User | null = null;
  // authed: a token is set (the gateway may still be connecting).
  authed = false;
  ready = false;
  conn: "connecting" | "connected" | "reconnecting" | "offline" = "connecting";
  guildOrder: string[] = [];
  guilds = new Map<string, GuildState>();
  channels = new Map<string, Channel>();
  privateIds: string[] = [];
  users = new Map<string, User>();
  logs = new Map<string, MessageLog>();
  reads = new Map<string, ReadState>();
  presences = new Map<string, string>();
  typing = new Map<string, Map<string, number>>(); // channel → user → expiry ms
  memberLists = new Map<string, MemberList>(); // by guild
  toasts: Toast[] = [];
  // joining holds guilds whose invite was accepted, until GUILD_CREATE.
  joining = new Set<string>();
  // pendingGuilds are READY's guilds (unavailable stubs) until their
  // GUILD_CREATE arrives.
  pendingGuilds = new Set<string>();
  private listeners = new Set<() => void>();
  private scheduled = false;
  private toastSeq = 0;

  subscribe(fn: () => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  changed() {
    if (this.scheduled) return;
    this.scheduled = true;
    queueMicrotask(() => {
      this.scheduled = false;
      for (const fn of this.listeners) fn();
    });
  }

  toast(text: string) {
    const id = ++this.toastSeq;
    this.toasts = [...this.toasts, { id, text }];
    this.changed();
    setTimeout(() => this.dismiss(id), 8000);
  }

  dismiss(id: number) {
    this.toasts = this.toasts.filter((t) => t.id !== id);
    this.changed();
  }

  reset() {
    this.authed = false;
    this.me = null;
    this.ready = false;
    this.guildOrder = [];
    this.guilds.clear();
    this.channels.clear();
    this.privateIds = [];
    this.logs.clear();
    this.reads.clear();
    this.presences.clear();
    this.typing.clear();
    this.memberLists.clear();
    this.pendingGuilds.clear();
    this.changed();
  }

  // ---- derived views ----

  // guildChannels is a guild's channels (not its threads) in sidebar order.
  guildChannels(guildId: string): Channel[] {
    const g = this.guilds.get(guildId);
    if (!g) return [];
    const out: Channel[] = [];
    for (const id of g.channelIds) {
      const c = this.channels.get(id);
      if (c && !isThread(c)) out.push(c);
    }
    return out.sort((a, b) => a.position - b.position || compareIds(a.id, b.id));
  }

  // threadsOf is a channel's active (not archived) threads that this
  // client knows of, the most recently active first.
  threadsOf(parentId: string): Channel[] {
    const p = this.channels.get(parentId);
    const g = p?.guild_id ? this.guilds.get(p.guild_id) : undefined;
    if (!g) return [];
    const out: Channel[] = [];
    for (const id of g.channelIds) {
      const c = this.channels.get(id);
      if (c && isThread(c) && c.parent_id === parentId && !c.thread_metadata?.archived) out.push(c);
    }
    return out.sort((a, b) => compareIds(b.last_message_id || b.id, a.last_message_id || a.id));
  }

  privateChannels(): Channel[] {
    return this.privateIds
      .map((id) => this.channels.get(id))
      .filter((c): c is Channel => !!c)
      .sort((a, b) => compareIds(b.last_message_id || b.id, a.last_message_id || a.id));
  }

  channelName(c: Channel): string {
    if (c.name) return c.name;
    const others = (c.recipients || []).filter((u) => u.id !== this.me?.id);
    return others.map((u) => u.global_name || u.username).join(", ") || "unnamed";
  }

  isUnread(c: Channel): boolean {
    if (!c.last_message_id || c.type === ChannelType.GuildCategory || c.type === ChannelType.GuildVoice) return false;
    const r = this.reads.get(c.id);
    return !r || compareIds(c.last_message_id, r.last_message_id) > 0;
  }

  mentions(channelId: string): number {
    return this.reads.get(channelId)?.mention_count || 0;
  }

  guildUnread(guildId: string): { unread: boolean; mentions: number } {
    let unread = false;
    let mentions = 0;
    for (const c of this.guildChannels(guildId)) {
      if (this.isUnread(c)) unread = true;
      mentions += this.mentions(c.id);
    }
    return { unread, mentions };
  }

  log(channelId: string): MessageLog {
    let l = this.logs.get(channelId);
    if (!l) {
      l = { items: [], reachedStart: false, atEnd: true, loading: false };
      this.logs.set(channelId, l);
    }
    return l;
  }

  member(guildId: string | undefined, userId: string): Member | undefined {
    if (!guildId) return undefined;
    return this.guilds.get(guildId)?.members.get(userId);
  }

  roles(guildId: string): Role[] {
    return [...(this.guilds.get(guildId)?.roles || [])].sort((a, b) => b.position - a.position);
  }

  typers(channelId: string): string[] {
    const m = this.typing.get(channelId);
    if (!m) return [];
    const now = Date.now();
    const out: string[] = [];
    for (const [uid, exp] of m) {
      if (exp > now && uid !== this.me?.id) out.push(uid);
    }
    return out;
  }

  // ---- mutations ----

  putUser(u: User | undefined) {
    if (u?.id) this.users.set(u.id, { ...this.users.get(u.id), ...u });
  }

  putChannel(c: Channel) {
    const prev = this.channels.get(c.id);
    this.channels.set(c.id, { ...prev, ...c });
    for (const u of c.recipients || []) this.putUser(u);
    if (c.guild_id) {
      this.guilds.get(c.guild_id)?.channelIds.add(c.id);
    } else if (!this.privateIds.includes(c.id)) {
      this.privateIds = [...this.privateIds, c.id];
    }
  }

  removeChannel(id: string) {
    const c = this.channels.get(id);
    this.channels.delete(id);
    this.logs.delete(id);
    if (c?.guild_id) this.guilds.get(c.guild_id)?.channelIds.delete(id);
    this.privateIds = this.privateIds.filter((x) => x !== id);
  }

  putGuild(d: any) {
    const g: GuildState = {
      id: d.id,
      name: d.name,
      owner_id: d.owner_id,
      roles: d.roles || [],
      member_count: d.member_count,
      channelIds: new Set(),
      members: new Map(),
    };
    this.joining.delete(d.id);
    this.pendingGuilds.delete(d.id);
    const old = this.guilds.get(d.id);
    // A new GUILD_CREATE replaces the channels and the active threads (it
    // lists every active thread the user sees, each with the user's
    // thread member when joined); archived threads learnt from messages
    // and archive lists stay, since no GUILD_CREATE names them.
    if (old) {
      for (const id of old.channelIds) {
        const c = this.channels.get(id);
        if (isThread(c) && c?.thread_metadata?.archived) g.channelIds.add(id);
        else this.channels.delete(id);
      }
    }
    this.guilds.set(d.id, g);
    if (!this.guildOrder.includes(d.id)) this.guildOrder = [...this.guildOrder, d.id];
    for (const c of d.channels || []) this.putChannel({ ...c, guild_id: d.id });
    for (const c of d.threads || []) this.putChannel({ ...c, guild_id: d.id });
    for (const m of d.members || []) {
      if (m.user) {
        this.putUser(m.user);
        g.members.set(m.user.id, m);
      }
    }
    for (const p of d.presences || []) if (p.user?.id) this.presences.set(p.user.id, p.status);
  }

  removeGuild(id: string) {
    const g = this.guilds.get(id);
    if (g) for (const c of g.channelIds) this.removeChannel(c);
    this.guilds.delete(id);
    this.memberLists.delete(id);
    this.guildOrder = this.guildOrder.filter((x) => x !== id);
  }

  // addMessage inserts a message into its channel's log (in id order),
  // replacing the optimistic copy with the same nonce.
  addMessage(m: Message): boolean {
    const l = this.log(m.channel_id);
    if (m.nonce !== undefined && m.nonce !== null) {
      const i = l.items.findIndex((x) => x.id.startsWith("pending-") && String(x.nonce) === String(m.nonce));
      if (i >= 0) {
        if (l.items.some((x) => x.id === m.id)) l.items.splice(i, 1);
        else l.items[i] = m;
        l.items.sort((a, b) => cmpMessages(a, b));
        return true;
      }
    }
    if (l.items.some((x) => x.id === m.id)) return false;
    if (!l.atEnd) return false;
    l.items.push(m);
    const n = l.items.length;
    if (n > 1 && cmpMessages(l.items[n - 2], m) > 0) l.items.sort(cmpMessages);
    return true;
  }
}

// Pending messages (ids "pending-...") sort after every real one.
function cmpMessages(a: Message, b: Message): number {
  const pa = a.id.startsWith("pending-");
  const pb = b.id.startsWith("pending-");
  if (pa !== pb) return pa ? 1 : -1;
  if (pa) return 0;
  return compareIds(a.id, b.id);
}

export const state = new State();
