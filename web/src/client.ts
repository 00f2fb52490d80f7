// The controller: logs in, runs the gateway, applies dispatches to state,
// and performs the user's actions over REST (optimistic where Discord's
// client is: sends, acks).

import { api, ApiError, dropBootReads, newNonce, setToken, setUnauthorizedHandler } from "./api";
import { BOOT_OFF_KEY, channelOfPath, EARLY_OFF_KEY, historyPath, PAGE, TOKEN_KEY } from "./bootreads";
import { Gateway, OP } from "./gateway";
import { navigate, route } from "./router";
import { dispatchListeners } from "./seams";
import { state, type MemberList } from "./state";
import type { Channel, Message } from "./types";
import { ChannelType, compareIds, isThread } from "./types";


let gw: Gateway | null = null;
// viewing is the channel on screen and whether its newest message is in
// view; only then do new messages count as read.
let viewing: { channelId: string; atBottom: boolean } | null = null;
const ackTimers = new Map<string, number>();
const typingSent = new Map<string, number>();

export function savedToken(): string | null {
  try {
    return localStorage.getItem(TOKEN_KEY);
  } catch {
    return null;
  }
}

export function gateway(): Gateway | null {
  return gw;
}

export function start(token: string) {
  try {
    localStorage.setItem(TOKEN_KEY, token);
  } catch {
    // Private mode: the session lasts as long as the tab.
  }
  setToken(token);
  state.authed = true;
  state.changed();
  setUnauthorizedHandler(() => {
    logout();
    state.toast("Your session has ended: log in again.");
  });
  gw?.stop();
  // held queues the gateway's dispatches while the boot script's stand-in
  // list waits for its first frame (see below): READY and GUILD_CREATE
  // take the longest work of a page load, and applied before that frame
  // they would hold it back. They are applied in order once it was shown.
  let held: [string, any][] | null = null;
  const apply = (t: string, d: any) => {
    try {
      onDispatch(t, d);
    } catch (e) {
      console.error("dispatch", t, e);
    }
    for (const fn of dispatchListeners) fn(t, d);
  };
  gw = new Gateway(token, {
    dispatch: (t, d) => {
      if (held) {
        held.push([t, d]);
        return;
      }
      apply(t, d);
      state.changed();
    },
    state: (s) => {
      state.conn = s;
      state.changed();
    },
    fatal: (code) => {
      if (code === 4004) {
        logout();
        state.toast("Your session has ended: log in again.");
      } else {
        state.conn = "offline";
        state.toast(`The gateway refused this session (close code ${code}).`);
      }
    },
  });
  // A channel URL's history and the channel itself do not depend on the
  // gateway: fetch them while the socket connects (the boot script in
  // index.html has usually asked already), and show the channel's messages
  // as soon as both are here, in one render (the rest of the app fills in
  // with READY and GUILD_CREATE).
  gw.start();
  if (window.concordBoot) window.concordBoot.started = true;
  const id = channelOfPath(location.pathname);
  if (id) {
    // localStorage "concord.earlyPaint" = "off" waits for READY instead,
    // and "concord.bootFetch" = "off" paints as before the boot script
    // (the channel rendered as soon as it arrives, its history after):
    // the first-paint benchmark's peers.
    let paintEarly = true;
    let boot = true;
    try {
      paintEarly = localStorage.getItem(EARLY_OFF_KEY) !== "off";
      boot = localStorage.getItem(BOOT_OFF_KEY) !== "off";
    } catch {
      // no storage: the defaults
    }
    if (!paintEarly) loadNewest(id);
    else if (boot) {
      // The boot script may paint a stand-in list from the reads adopted
      // here (standin.ts): the history is put in state (and the pane
      // rendered, replacing it) once that list has been on screen for a
      // frame, so that the bundle's longer render never holds it back.
      const b = window.concordBoot;
      if (b) b.handover = b.token === token;
      const shown = afterStandIn(b?.standIn);
      if (b?.standIn) {
        const queue: [string, any][] = (held = []);
        const flush = () => {
          if (held !== queue) return;
          held = null;
          for (const [t, d] of queue) apply(t, d);
          if (queue.length) state.changed();
        };
        shown.then(flush);
        // Not for long whatever happens to the reads: the rest of the app
        // needs READY.
        setTimeout(flush, 1000);
      }
      loadNewest(id, Promise.all([prefetchChannel(id, false), shown]).then(() => {}));
    } else {
      loadNewest(id);
      prefetchChannel(id, true);
    }
  }
  // Every boot read was adopted above (synchronously, by the first call of
  // each); the rest would only ever be stale.
  dropBootReads();
}

// afterStandIn settles once the boot script's stand-in list, if it paints
// one, has been on screen: when the browser reports that a message of it
// was presented (Element Timing; a layout object removed before that is
// never reported, and the user might never have seen it), or where that
// is not supported, in the task after the animation frame that laid it
// out. A hidden page (no frames) does not wait, nor any page longer than a
// bound: the bundle's pane must not wait long for a paint.
async function afterStandIn(standIn?: Promise<boolean>): Promise<void> {
  if (!standIn || !(await standIn) || document.visibilityState === "hidden") return;
  await new Promise<void>((done) => {
    let obs: PerformanceObserver | undefined;
    const finish = () => {
      clearTimeout(bound);
      obs?.disconnect();
      done();
    };
    const bound = setTimeout(finish, 300);
    if (PerformanceObserver.supportedEntryTypes?.includes("element")) {
      obs = new PerformanceObserver((l) => {
        if (l.getEntries().some((e) => (e as any).identifier === "message")) finish();
      });
      obs.observe({ type: "element", buffered: true });
    } else {
      requestAnimationFrame(() => setTimeout(finish, 0));
    }
  });
}

// early is the channel of the URL the app opened on, fetched over REST
// before the gateway's READY; it stands in until its guild arrives.
let early: Channel | null = null;

// prefetchChannel fetches the URL's channel and puts it in state, to
// render at once or (render false) with the history that waits for it.
async function prefetchChannel(id: string, render: boolean) {
  try {
    const c = await api<Channel>("GET", `/channels/${id}`);
    if (state.channels.has(id)) return; // the gateway was faster
    early = c;
    state.putChannel(c);
    if (render) state.changed();
  } catch {
    // The gateway's view decides what is shown; nothing to say yet.
  }
}

export function logout() {
  gw?.stop();
  gw = null;
  try {
    localStorage.removeItem(TOKEN_KEY);
  } catch {
    // nothing stored
  }
  setToken(null);
  state.reset();
}

export async function login(username: string, password: string) {
  const r = await api<{ token: string }>("POST", "/auth/login", { login: username, password });
  start(r.token);
}

export async function register(username: string, password: string) {
  const r = await api<{ token: string }>("POST", "/auth/register", { username, password });
  start(r.token);
}

// ---- dispatches ----

function onDispatch(t: string, d: any) {
  switch (t) {
    case "READY": {
      performance.mark("concord:ready");
      // A READY after a failed resume starts from scratch: events were
      // missed, so every loaded history is stale (kept on screen until
      // reloaded; the channel on screen reloads now, others when opened).
      // The first READY keeps the history prefetched at start.
      const again = state.ready;
      if (again) for (const l of state.logs.values()) l.atEnd = false;
      state.guilds.clear();
      state.guildOrder = [];
      state.channels.clear();
      state.privateIds = [];
      state.reads.clear();
      state.memberLists.clear();
      state.me = d.user;
      state.putUser(d.user);
      for (const c of d.private_channels || []) state.putChannel(c);
      for (const e of d.read_state?.entries || []) {
        state.reads.set(e.id, { last_message_id: e.last_message_id || "0", mention_count: e.mention_count || 0 });
      }
      state.pendingGuilds.clear();
      for (const g of d.guilds || []) {
        if (!g.unavailable) state.putGuild(g);
        else state.pendingGuilds.add(g.id);
      }
      // The early channel stays on screen until its guild's GUILD_CREATE.
      if (early?.guild_id && state.pendingGuilds.has(early.guild_id)) state.channels.set(early.id, early);
      early = null;
      state.ready = true;
      if (again && viewing) loadNewest(viewing.channelId);
      refocus();
      break;
    }
    case "RESUMED":
      refocus();
      break;
    case "GUILD_CREATE":
      performance.mark("concord:guild-create");
      if (!d.unavailable) {
        state.putGuild(d);
      }
      if (viewing && state.channels.get(viewing.channelId)?.guild_id === d.id) refocus();
      break;
    case "GUILD_UPDATE": {
      const g = state.guilds.get(d.id);
      if (g) Object.assign(g, { name: d.name, owner_id: d.owner_id, roles: d.roles || g.roles });
      break;
    }
    case "GUILD_DELETE":
      state.removeGuild(d.id);
      break;
    case "CHANNEL_CREATE":
    case "CHANNEL_UPDATE":
      state.putChannel(d);
      break;
    case "CHANNEL_DELETE":
      state.removeChannel(d.id);
      break;
    case "THREAD_CREATE":
    case "THREAD_UPDATE":
      putThread(d);
      break;
    case "THREAD_DELETE":
      removeThread(d);
      break;
    case "THREAD_LIST_SYNC":
      for (const th of d.threads || []) putThread({ ...th, guild_id: d.guild_id });
      for (const m of d.members || []) setThreadMember(m.id, m);
      break;
    case "THREAD_MEMBER_UPDATE":
      setThreadMember(d.id, d);
      break;
    case "THREAD_MEMBERS_UPDATE": {
      const c = state.channels.get(d.id);
      if (c) {
        c.member_count = d.member_count;
        const me = state.me?.id;
        if ((d.added_members || []).some((m: any) => m.user_id === me)) {
          setThreadMember(d.id, d.added_members.find((m: any) => m.user_id === me));
        }
        if ((d.removed_member_ids || []).includes(me)) setThreadMember(d.id, null);
      }
      break;
    }
    case "GUILD_ROLE_CREATE":
    case "GUILD_ROLE_UPDATE": {
      const g = state.guilds.get(d.guild_id);
      if (g) g.roles = [...g.roles.filter((r) => r.id !== d.role.id), d.role];
      break;
    }
    case "GUILD_ROLE_DELETE": {
      const g = state.guilds.get(d.guild_id);
      if (g) g.roles = g.roles.filter((r) => r.id !== d.role_id);
      break;
    }
    case "GUILD_MEMBER_ADD":
    case "GUILD_MEMBER_UPDATE": {
      const g = state.guilds.get(d.guild_id);
      if (g && d.user) {
        state.putUser(d.user);
        g.members.set(d.user.id, { ...g.members.get(d.user.id), ...d });
      }
      break;
    }
    case "GUILD_MEMBER_REMOVE": {
      if (d.user?.id === state.me?.id) state.removeGuild(d.guild_id);
      else state.guilds.get(d.guild_id)?.members.delete(d.user?.id);
      break;
    }
    case "MESSAGE_CREATE":
      onMessage(d);
      break;
    case "PASSIVE_UPDATE_V1":
      onPassiveUpdate(d);
      break;
    case "MESSAGE_UPDATE": {
      if (d.thread) putThread({ ...d.thread, guild_id: d.thread.guild_id || d.guild_id });
      const l = state.logs.get(d.channel_id);
      const i = l ? l.items.findIndex((m) => m.id === d.id) : -1;
      if (l && i >= 0) l.items[i] = { ...l.items[i], ...d };
      break;
    }
    case "MESSAGE_DELETE":
      removeMessages(d.channel_id, [d.id]);
      break;
    case "MESSAGE_REACTION_ADD":
    case "MESSAGE_REACTION_REMOVE":
      // This user's own taps were applied at once (react): skip their echo.
      if (d.user_id === state.me?.id && ownReactions.delete(reactionKey(d.message_id, d.emoji, t === "MESSAGE_REACTION_ADD"))) break;
      bumpReaction(d.channel_id, d.message_id, d.emoji, t === "MESSAGE_REACTION_ADD" ? 1 : -1, d.user_id === state.me?.id);
      break;
    case "MESSAGE_REACTION_REMOVE_ALL":
      updateMessage(d.channel_id, d.message_id, (m) => ({ ...m, reactions: [] }));
      break;
    case "MESSAGE_REACTION_REMOVE_EMOJI":
      updateMessage(d.channel_id, d.message_id, (m) => ({
        ...m,
        reactions: (m.reactions || []).filter((r) => !sameEmoji(r.emoji, d.emoji)),
      }));
      break;
    case "MESSAGE_DELETE_BULK":
      removeMessages(d.channel_id, d.ids || []);
      break;
    case "MESSAGE_ACK": {
      const cur = state.reads.get(d.channel_id);
      if (!cur || compareIds(d.message_id, cur.last_message_id) >= 0) {
        state.reads.set(d.channel_id, { last_message_id: d.message_id, mention_count: d.mention_count || 0 });
      }
      break;
    }
    case "TYPING_START": {
      if (d.member?.user) state.putUser(d.member.user);
      let m = state.typing.get(d.channel_id);
      if (!m) state.typing.set(d.channel_id, (m = new Map()));
      m.set(d.user_id, Date.now() + 10000);
      setTimeout(() => state.changed(), 10050);
      break;
    }
    case "PRESENCE_UPDATE":
      if (d.user?.id) state.presences.set(d.user.id, d.status);
      break;
    case "GUILD_MEMBER_LIST_UPDATE":
      applyMemberList(d);
      break;
    case "USER_UPDATE":
      state.putUser(d);
      if (state.me?.id === d.id) state.me = { ...state.me, ...d };
      break;
  }
}

function onMessage(m: Message) {
  state.putUser(m.author);
  if (m.thread) putThread({ ...m.thread, guild_id: m.thread.guild_id || m.guild_id });
  let c = state.channels.get(m.channel_id);
  if (c && isThread(c) && !m.id.startsWith("pending-")) c.message_count = (c.message_count || 0) + 1;
  if (!c && !m.guild_id) {
    // A DM opened by someone else: fetch the channel, then show it.
    api<Channel>("GET", `/channels/${m.channel_id}`)
      .then((ch) => {
        state.putChannel({ ...ch, last_message_id: m.id });
        state.changed();
      })
      .catch(() => {});
  }
  if (c && (!c.last_message_id || compareIds(m.id, c.last_message_id) > 0)) c.last_message_id = m.id;
  state.addMessage(m);
  state.typing.get(m.channel_id)?.delete(m.author.id);
  const me = state.me?.id;
  if (m.author.id === me) {
    // Our own message is read everywhere we are.
    const r = state.reads.get(m.channel_id);
    state.reads.set(m.channel_id, { last_message_id: m.id, mention_count: r?.mention_count || 0 });
    return;
  }
  if (reading(m.channel_id)) {
    scheduleAck(m.channel_id);
  } else if (mentionsMe(m)) {
    const r = state.reads.get(m.channel_id) || { last_message_id: "0", mention_count: 0 };
    state.reads.set(m.channel_id, { ...r, mention_count: r.mention_count + 1 });
  }
}

// onPassiveUpdate applies PASSIVE_UPDATE_V1. In a guild larger than our
// large_threshold the server sends messages only for the channel on screen
// (named by op 14) and those that mention us; every other channel reports
// its last message here, which lights its unread badge. Messages in
// between never reached us, so a loaded history of such a channel is no
// longer at its end: it is reloaded when opened (Messages.tsx), or now if
// it is on screen (op 14 and the update crossed).
function onPassiveUpdate(d: { channels?: { id: string; last_message_id: string | null }[] }) {
  for (const e of d.channels || []) {
    const c = state.channels.get(e.id);
    if (!c || !e.last_message_id) continue;
    if (c.last_message_id && compareIds(e.last_message_id, c.last_message_id) <= 0) continue;
    c.last_message_id = e.last_message_id;
    const l = state.logs.get(e.id);
    if (l && l.atEnd) {
      l.atEnd = false;
      if (viewing?.channelId === e.id) loadNewer(e.id);
    }
  }
}

function mentionsMe(m: Message): boolean {
  const me = state.me?.id;
  if (!me) return false;
  if (m.mention_everyone) return true;
  if (m.mentions?.some((u) => u.id === me)) return true;
  const mine = state.member(m.guild_id, me)?.roles || [];
  return (m.mention_roles || []).some((r) => mine.includes(r));
}

function removeMessages(channelId: string, ids: string[]) {
  const l = state.logs.get(channelId);
  if (l) l.items = l.items.filter((m) => !ids.includes(m.id));
}

export function applyMemberList(d: any) {
  let list = state.memberLists.get(d.guild_id);
  if (!list || list.id !== d.id) {
    list = { id: d.id, groups: [], items: [], memberCount: 0, onlineCount: 0 } as MemberList;
    state.memberLists.set(d.guild_id, list);
  }
  list.groups = d.groups || list.groups;
  list.memberCount = d.member_count ?? list.memberCount;
  list.onlineCount = d.online_count ?? list.onlineCount;
  for (const op of d.ops || []) {
    switch (op.op) {
      case "SYNC":
        for (let i = 0; i < (op.items || []).length; i++) list.items[op.range[0] + i] = op.items[i];
        break;
      case "INVALIDATE":
        for (let i = op.range[0]; i <= op.range[1]; i++) list.items[i] = undefined;
        break;
      case "INSERT":
        list.items.splice(op.index, 0, op.item);
        break;
      case "UPDATE":
        list.items[op.index] = op.item;
        break;
      case "DELETE":
        list.items.splice(op.index, 1);
        break;
    }
  }
  for (const it of list.items) {
    const u = it?.member?.user;
    if (u) {
      state.putUser(u);
      if (it!.member!.presence?.status) state.presences.set(u.id, it!.member!.presence!.status);
    }
  }
}

// ---- focus, acks, typing ----

// memberRanges is the member-list rows the sidebar shows, per channel.
const memberRanges = new Map<string, number[][]>();

function refocus() {
  if (!viewing) return;
  let c = state.channels.get(viewing.channelId);
  // A thread shows its parent's member list.
  if (isThread(c) && c?.parent_id) c = state.channels.get(c.parent_id) || c;
  if (c?.guild_id) requestMembers(c.guild_id, c.id, memberRanges.get(c.id) || [[0, 99]]);
}

// requestMembers sends op 14 for the channel on screen: the member-list
// rows to show and typing for this channel.
export function requestMembers(guildId: string, channelId: string, ranges: number[][]) {
  memberRanges.set(channelId, ranges);
  gw?.send(OP.LAZY_REQUEST, {
    guild_id: guildId,
    channels: { [channelId]: ranges },
    typing: true,
    activities: true,
    threads: false,
  });
}

export function setViewing(channelId: string | null, atBottom: boolean) {
  const prev = viewing?.channelId;
  viewing = channelId ? { channelId, atBottom } : null;
  if (channelId && channelId !== prev) refocus();
  if (channelId && reading(channelId)) scheduleAck(channelId);
}

function reading(channelId: string): boolean {
  return !!viewing && viewing.channelId === channelId && viewing.atBottom && document.visibilityState === "visible";
}

document.addEventListener("visibilitychange", () => {
  if (viewing && reading(viewing.channelId)) scheduleAck(viewing.channelId);
});

function scheduleAck(channelId: string) {
  if (ackTimers.has(channelId)) return;
  ackTimers.set(
    channelId,
    window.setTimeout(() => {
      ackTimers.delete(channelId);
      ack(channelId);
    }, 100),
  );
}

// ack marks the channel read up to its newest message, at once on this
// screen; MESSAGE_ACK carries it to the user's other sessions.
export async function ack(channelId: string) {
  const c = state.channels.get(channelId);
  const log = state.logs.get(channelId);
  let last = c?.last_message_id || "";
  const newest = log?.atEnd ? log.items.filter((m) => !m.id.startsWith("pending-")).at(-1)?.id : undefined;
  if (newest && (!last || compareIds(newest, last) > 0)) last = newest;
  if (!last) return;
  const r = state.reads.get(channelId);
  if (r && compareIds(r.last_message_id, last) >= 0 && r.mention_count === 0) return;
  state.reads.set(channelId, { last_message_id: last, mention_count: 0 });
  state.changed();
  try {
    await api("POST", `/channels/${channelId}/messages/${last}/ack`, { token: null });
  } catch (e) {
    if (e instanceof ApiError && !e.transient) return;
    state.toast("Could not mark the channel read: " + (e as Error).message);
  }
}

export function typing(channelId: string) {
  const now = Date.now();
  if (now - (typingSent.get(channelId) || 0) < 8000) return;
  typingSent.set(channelId, now);
  api("POST", `/channels/${channelId}/typing`).catch(() => {});
}

// ---- messages ----

// loadNewest fetches a channel's newest page; with alongside, it shows
// the page only once that has settled too (it never rejects).
export async function loadNewest(channelId: string, alongside?: Promise<void>) {
  const l = state.log(channelId);
  l.loading = true;
  l.error = undefined;
  state.changed();
  try {
    const page = await api<Message[]>("GET", historyPath(channelId));
    performance.mark("concord:history");
    if (alongside) await alongside;
    const pending = l.items.filter((m) => m.id.startsWith("pending-"));
    l.items = page.reverse().concat(pending);
    l.reachedStart = page.length < PAGE;
    l.atEnd = true;
    absorb(page);
  } catch (e) {
    l.error = (e as Error).message;
  } finally {
    l.loading = false;
    state.changed();
  }
}

// absorb records what a page of history tells besides its messages: their
// authors, and the threads they started (archived ones included, which no
// thread list names).
function absorb(page: Message[]) {
  for (const m of page) {
    state.putUser(m.author);
    if (m.thread) putThread({ ...m.thread, guild_id: m.thread.guild_id || m.guild_id });
  }
}

// loadOlder fetches the page before the oldest loaded message.
export async function loadOlder(channelId: string) {
  const l = state.log(channelId);
  if (l.loading || l.reachedStart) return;
  const oldest = l.items.find((m) => !m.id.startsWith("pending-"));
  if (!oldest) return loadNewest(channelId);
  l.loading = true;
  state.changed();
  try {
    const page = await api<Message[]>("GET", `/channels/${channelId}/messages?limit=${PAGE}&before=${oldest.id}`);
    absorb(page);
    const have = new Set(l.items.map((m) => m.id));
    l.items = page.filter((m) => !have.has(m.id)).reverse().concat(l.items);
    l.reachedStart = page.length < PAGE;
  } catch (e) {
    state.toast("Could not load older messages: " + (e as Error).message);
  } finally {
    l.loading = false;
    state.changed();
  }
}

// loadNewer fetches the page after the newest loaded message (after a jump).
export async function loadNewer(channelId: string) {
  const l = state.log(channelId);
  if (l.loading || l.atEnd) return;
  const newest = l.items.filter((m) => !m.id.startsWith("pending-")).at(-1);
  if (!newest) return loadNewest(channelId);
  l.loading = true;
  state.changed();
  try {
    const page = await api<Message[]>("GET", `/channels/${channelId}/messages?limit=${PAGE}&after=${newest.id}`);
    absorb(page);
    page.sort((a, b) => compareIds(a.id, b.id));
    const have = new Set(l.items.map((m) => m.id));
    l.items = l.items.concat(page.filter((m) => !have.has(m.id)));
    l.atEnd = page.length < PAGE;
  } catch (e) {
    state.toast("Could not load newer messages: " + (e as Error).message);
  } finally {
    l.loading = false;
    state.changed();
  }
}

// loadAround opens the channel at a message (a message link).
export async function loadAround(channelId: string, messageId: string) {
  const l = state.log(channelId);
  l.loading = true;
  l.error = undefined;
  state.changed();
  try {
    const page = await api<Message[]>("GET", `/channels/${channelId}/messages?limit=${PAGE}&around=${messageId}`);
    absorb(page);
    page.sort((a, b) => compareIds(a.id, b.id));
    l.items = page;
    l.reachedStart = false;
    const c = state.channels.get(channelId);
    const last = page.at(-1)?.id;
    l.atEnd = !!last && !!c?.last_message_id && compareIds(last, c.last_message_id) >= 0;
  } catch (e) {
    l.error = (e as Error).message;
  } finally {
    l.loading = false;
    state.changed();
  }
}

// resolveMentions turns "@name" of a known member or role into Discord's
// <@id> / <@&id>, as Discord's client does before sending.
function resolveMentions(channelId: string, content: string): string {
  const c = state.channels.get(channelId);
  const names = new Map<string, string>();
  if (c?.guild_id) {
    const g = state.guilds.get(c.guild_id);
    for (const r of g?.roles || []) if (r.id !== c.guild_id) names.set(r.name.toLowerCase(), `<@&${r.id}>`);
    for (const [id, m] of g?.members || []) {
      const u = state.users.get(id) || m.user;
      if (u) names.set(u.username.toLowerCase(), `<@${id}>`);
    }
  } else {
    for (const u of c?.recipients || []) names.set(u.username.toLowerCase(), `<@${u.id}>`);
  }
  return content.replace(/(^|\s)@([\w.\-]{2,32})/g, (all, pre, name) => {
    const lower = name.toLowerCase();
    if (lower === "everyone" || lower === "here") return all;
    const id = names.get(lower);
    return id ? pre + id : all;
  });
}

const pendingSends = new Map<string, { channelId: string; body: any }>();

// send renders the message at once and posts it with a nonce and
// enforce_nonce, so a retry after a lost answer never posts it twice.
export function send(channelId: string, text: string, replyTo?: string): boolean {
  // Until READY the client does not know who it is (a channel URL paints
  // before the gateway has answered): the text stays in the composer.
  if (!state.me) {
    state.toast("Still connecting to Concord: send again in a moment.");
    return false;
  }
  const content = resolveMentions(channelId, text);
  const nonce = newNonce();
  const body: any = { content, nonce, enforce_nonce: true };
  if (replyTo) body.message_reference = { message_id: replyTo, channel_id: channelId, fail_if_not_exists: false };
  const me = state.me!;
  const l = state.log(channelId);
  const ref = replyTo ? l.items.find((m) => m.id === replyTo) : undefined;
  l.items.push({
    id: "pending-" + nonce,
    channel_id: channelId,
    author: me,
    content,
    timestamp: new Date().toISOString(),
    edited_timestamp: null,
    mention_everyone: false,
    mentions: [],
    mention_roles: [],
    type: replyTo ? 19 : 0,
    nonce,
    referenced_message: ref || null,
    pending: true,
  });
  pendingSends.set(nonce, { channelId, body });
  state.changed();
  post(nonce, 0);
  return true;
}

async function post(nonce: string, attempt: number) {
  const p = pendingSends.get(nonce);
  if (!p) return;
  try {
    const m = await api<Message>("POST", `/channels/${p.channelId}/messages`, p.body);
    pendingSends.delete(nonce);
    onMessage({ ...m, nonce });
    state.changed();
  } catch (e) {
    const err = e as ApiError;
    if (err.transient && attempt < 4) {
      const wait = err.retryAfter > 0 ? err.retryAfter * 1000 : 500 * 2 ** attempt;
      setTimeout(() => post(nonce, attempt + 1), wait);
      return;
    }
    const l = state.log(p.channelId);
    const m = l.items.find((x) => x.id === "pending-" + nonce);
    if (m) {
      m.pending = false;
      m.failed = err.message;
    }
    state.changed();
  }
}

export function retrySend(nonce: string) {
  const p = pendingSends.get(nonce);
  if (!p) return;
  const m = state.log(p.channelId).items.find((x) => x.id === "pending-" + nonce);
  if (m) {
    m.pending = true;
    m.failed = undefined;
  }
  state.changed();
  post(nonce, 0);
}

export function discardSend(nonce: string) {
  const p = pendingSends.get(nonce);
  if (!p) return;
  pendingSends.delete(nonce);
  removeMessages(p.channelId, ["pending-" + nonce]);
  state.changed();
}

export async function editMessage(channelId: string, messageId: string, content: string) {
  try {
    const m = await api<Message>("PATCH", `/channels/${channelId}/messages/${messageId}`, {
      content: resolveMentions(channelId, content),
    });
    onDispatch("MESSAGE_UPDATE", m);
    state.changed();
  } catch (e) {
    state.toast("Could not edit the message: " + (e as Error).message);
  }
}

export async function deleteMessage(channelId: string, messageId: string) {
  try {
    await api("DELETE", `/channels/${channelId}/messages/${messageId}`);
    removeMessages(channelId, [messageId]);
    state.changed();
  } catch (e) {
    state.toast("Could not delete the message: " + (e as Error).message);
  }
}

// ---- reactions ----

type Emoji = { id?: string | null; name: string };

function sameEmoji(a: Emoji, b: Emoji): boolean {
  return a.id ? a.id === b.id : !b.id && a.name === b.name;
}

function reactionKey(messageId: string, e: Emoji, add: boolean): string {
  return `${messageId}/${e.id || e.name}/${add ? "+" : "-"}`;
}

// ownReactions are this user's taps applied at once, whose gateway echo is
// still to come.
const ownReactions = new Set<string>();

function updateMessage(channelId: string, messageId: string, fn: (m: Message) => Message) {
  const l = state.logs.get(channelId);
  const i = l ? l.items.findIndex((m) => m.id === messageId) : -1;
  if (l && i >= 0) l.items[i] = fn(l.items[i]);
}

// bumpReaction adds n (1 or -1) to an emoji's count on a message.
function bumpReaction(channelId: string, messageId: string, emoji: Emoji, n: number, me: boolean) {
  updateMessage(channelId, messageId, (m) => {
    const rs = (m.reactions || []).map((r) => ({ ...r }));
    let r = rs.find((r) => sameEmoji(r.emoji, emoji));
    if (!r) {
      if (n < 0) return m;
      r = { count: 0, me: false, emoji: { id: emoji.id || null, name: emoji.name } };
      rs.push(r);
    }
    r.count += n;
    if (me) r.me = n > 0;
    return { ...m, reactions: rs.filter((r) => r.count > 0) };
  });
}

// react adds (or, with remove, takes back) the user's reaction, shown at
// once and undone with a message when the server refuses.
export async function react(channelId: string, messageId: string, emoji: Emoji, remove: boolean) {
  const key = reactionKey(messageId, emoji, !remove);
  ownReactions.add(key);
  bumpReaction(channelId, messageId, emoji, remove ? -1 : 1, true);
  state.changed();
  const e = encodeURIComponent(emoji.id ? `${emoji.name}:${emoji.id}` : emoji.name);
  const path = `/channels/${channelId}/messages/${messageId}/reactions/${e}/@me`;
  try {
    // Reactions are rate limited per channel (Discord: one per 0.25 s):
    // a quick second tap waits its turn, as Discord's client queues it.
    for (let attempt = 0; ; attempt++) {
      try {
        await api(remove ? "DELETE" : "PUT", path);
        break;
      } catch (err) {
        if (!(err instanceof ApiError) || !err.transient || attempt >= 4) throw err;
        await new Promise((r) => setTimeout(r, Math.max(250, err.retryAfter * 1000)));
      }
    }
  } catch (err) {
    ownReactions.delete(key);
    bumpReaction(channelId, messageId, emoji, remove ? 1 : -1, true);
    state.changed();
    state.toast("Could not react: " + (err as Error).message);
  }
}

// ---- guilds, channels, invites, DMs ----

export async function createGuild(name: string): Promise<string> {
  const g = await api<any>("POST", "/guilds", { name });
  return g.id;
}

export async function createChannel(
  guildId: string,
  name: string,
  type: number,
  parentId: string | null,
  hidden: boolean,
): Promise<Channel> {
  const body: any = { name, type };
  if (parentId) body.parent_id = parentId;
  if (hidden) body.permission_overwrites = [{ id: guildId, type: 0, allow: "0", deny: String(1 << 10) }];
  const c = await api<Channel>("POST", `/guilds/${guildId}/channels`, body);
  state.putChannel({ ...c, guild_id: guildId });
  state.changed();
  return c;
}

export async function createInvite(channelId: string): Promise<string> {
  const inv = await api<{ code: string }>("POST", `/channels/${channelId}/invites`, { max_age: 86400 });
  return inv.code;
}

export async function getInvite(code: string): Promise<any> {
  return api("GET", `/invites/${encodeURIComponent(code)}`);
}

export async function acceptInvite(code: string): Promise<any> {
  const inv = await api<any>("POST", `/invites/${encodeURIComponent(code)}`, {});
  const gid = inv?.guild?.id || inv?.guild_id;
  if (gid && !state.guilds.has(gid)) state.joining.add(gid);
  return inv;
}

export async function openDM(userIds: string[]): Promise<Channel> {
  const body = userIds.length === 1 ? { recipient_id: userIds[0] } : { recipients: userIds };
  const c = await api<Channel>("POST", "/users/@me/channels", body);
  state.putChannel(c);
  state.changed();
  return c;
}

export async function leaveGuild(guildId: string) {
  await api("DELETE", `/users/@me/guilds/${guildId}`);
  state.removeGuild(guildId);
  state.changed();
}

export function firstTextChannel(guildId: string): Channel | undefined {
  return state.guildChannels(guildId).find((c) => c.type === ChannelType.GuildText || c.type === ChannelType.GuildAnnouncement);
}

// ---- threads ----

// putThread records a thread from THREAD_CREATE / THREAD_UPDATE, a thread
// list or a REST answer, keeping the user's membership when the event
// carries none.
function putThread(d: any) {
  if (!d?.id || !d.guild_id) return;
  const prev = state.channels.get(d.id);
  const c: Channel = { position: 0, ...d };
  if (d.member === undefined && prev?.member) c.member = prev.member;
  state.putChannel(c);
}

// removeThread forgets a deleted thread: its entry, its link on the
// message it started from, and (when it is on screen) its pane, which
// gives way to its channel.
function removeThread(d: any) {
  const parent = d.parent_id || state.channels.get(d.id)?.parent_id;
  state.removeChannel(d.id);
  if (parent) updateMessage(parent, d.id, (m) => ({ ...m, thread: undefined }));
  const r = route();
  if (parent && r.parts[0] === "channels" && r.parts[2] === d.id) {
    navigate(`/channels/${r.parts[1]}/${parent}`, true);
    state.toast("The thread was deleted.");
  }
}

function setThreadMember(threadId: string, m: any) {
  const c = state.channels.get(threadId);
  if (c) c.member = m ? { id: threadId, user_id: m.user_id, join_timestamp: m.join_timestamp } : null;
}

// createThread starts a public thread from a message (the thread's id is
// the message's) and returns it.
export async function createThread(channelId: string, messageId: string, name: string): Promise<Channel> {
  const c = await api<Channel>("POST", `/channels/${channelId}/messages/${messageId}/threads`, { name });
  const parent = state.channels.get(channelId);
  putThread({ ...c, guild_id: c.guild_id || parent?.guild_id });
  updateMessage(channelId, messageId, (m) => ({ ...m, thread: c }));
  state.changed();
  return c;
}

// startThread starts a thread in a channel without a starter message:
// public (11) or private (12, seen by its members and MANAGE_THREADS
// only). It returns the thread, already in the sidebar.
export async function startThread(channelId: string, name: string, priv: boolean): Promise<Channel> {
  const c = await api<Channel>("POST", `/channels/${channelId}/threads`, {
    name,
    type: priv ? ChannelType.PrivateThread : ChannelType.PublicThread,
  });
  putThread({ ...c, guild_id: c.guild_id || state.channels.get(channelId)?.guild_id });
  state.changed();
  return c;
}

// ArchivedPage is one page of a channel's archived threads.
export type ArchivedPage = { threads: Channel[]; hasMore: boolean };

// loadArchivedThreads reads a page of a channel's archived threads, newest
// archived first, before the archive time `before` (ISO) when set: the
// public ones and the private ones the user is in, plus every private one
// when the user may manage threads (the server decides; a 403 on that
// list only means the user may not).
export async function loadArchivedThreads(channelId: string, before?: string, manage = false): Promise<ArchivedPage> {
  const q = `?limit=25${before ? "&before=" + encodeURIComponent(before) : ""}`;
  type List = { threads: Channel[]; members: any[]; has_more: boolean };
  const lists: Promise<List | null>[] = [
    api<List>("GET", `/channels/${channelId}/threads/archived/public${q}`),
    api<List>("GET", `/channels/${channelId}/users/@me/threads/archived/private${q}`).catch(() => null),
  ];
  if (manage) lists.push(api<List>("GET", `/channels/${channelId}/threads/archived/private${q}`).catch(() => null));
  const got = await Promise.all(lists);
  const guildId = state.channels.get(channelId)?.guild_id;
  const seen = new Map<string, Channel>();
  let hasMore = false;
  for (const l of got) {
    if (!l) continue;
    hasMore ||= l.has_more;
    for (const th of l.threads || []) {
      const c = { ...th, guild_id: th.guild_id || guildId };
      seen.set(c.id, c);
      putThread(c);
    }
    for (const m of l.members || []) setThreadMember(m.id, m);
  }
  const at = (c: Channel) => c.thread_metadata?.archive_timestamp || "";
  const threads = [...seen.values()].sort((a, b) => (at(a) < at(b) ? 1 : at(a) > at(b) ? -1 : 0));
  state.changed();
  return { threads, hasMore };
}

// addThreadMember adds another member of the guild to a thread (a private
// thread needs MANAGE_THREADS, or membership of an invitable one).
export async function addThreadMember(threadId: string, userId: string) {
  await api("PUT", `/channels/${threadId}/thread-members/${userId}`);
}

// setThreadArchived archives or reopens a thread (PATCH, MANAGE_THREADS
// or the thread's owner).
export async function setThreadArchived(threadId: string, archived: boolean) {
  try {
    const c = await api<Channel>("PATCH", `/channels/${threadId}`, { archived });
    putThread({ ...c, guild_id: c.guild_id || state.channels.get(threadId)?.guild_id });
    state.changed();
  } catch (e) {
    state.toast(`Could not ${archived ? "close" : "reopen"} the thread: ` + (e as Error).message);
  }
}

// joinThread adds the user to a thread (PUT thread-members/@me).
export async function joinThread(threadId: string) {
  try {
    await api("PUT", `/channels/${threadId}/thread-members/@me`);
  } catch (e) {
    state.toast("Could not join the thread: " + (e as Error).message);
  }
}
