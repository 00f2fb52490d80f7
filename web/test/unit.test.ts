// Unit tests of the client's logic, run in Chromium by web/unit_test.go
// (they need a DOM, and no Node is involved). Each test throws on failure;
// the page publishes the results in window.__results.

import { describeError, newNonce } from "../src/api";
import { applyMemberList } from "../src/client";
import { State, state } from "../src/state";
import type { Message } from "../src/types";
import { compareIds } from "../src/types";
import { dropStandIn, paintStandIn, standInChannel, standInHeights } from "../src/standin";
import { channelLabel } from "../src/ui/Sidebar";
import { burstsFor, LiveSession, userIdFromToken } from "../src/live/session";
import { VoiceClient } from "../src/voice/voice";

const tests: [string, () => void][] = [];
const test = (name: string, fn: () => void) => tests.push([name, fn]);
function eq(got: unknown, want: unknown, what = "") {
  const g = JSON.stringify(got);
  const w = JSON.stringify(want);
  if (g !== w) throw new Error(`${what}: got ${g}, want ${w}`);
}

function msg(id: string, extra: Partial<Message> = {}): Message {
  return {
    id, channel_id: "10", author: { id: "1", username: "a" }, content: "m" + id, timestamp: "2026-01-01T00:00:00+00:00",
    edited_timestamp: null, mention_everyone: false, mentions: [], mention_roles: [], type: 0, ...extra,
  };
}

test("compareIds orders snowflakes numerically", () => {
  eq(["10", "9", "100", "11"].sort(compareIds), ["9", "10", "11", "100"]);
});

test("describeError: field errors become lines", () => {
  const e = describeError(400, {
    code: 50035, message: "Invalid Form Body",
    errors: { username: { _errors: [{ code: "USERNAME_ALREADY_TAKEN", message: "Username is unavailable." }] } },
  });
  eq(e.message, "username: Username is unavailable.");
  eq(e.transient, false);
});

test("describeError: 429, 401, 5xx and known codes", () => {
  eq(describeError(429, { retry_after: 2.2 }).message, "You are doing that too fast: try again in 3 s.");
  eq(describeError(429, {}).transient, true);
  eq(describeError(401, { code: 0 }).message, "Your session has ended: log in again.");
  eq(describeError(503, {}).transient, true);
  eq(describeError(403, { code: 50013, message: "Missing Permissions" }).message, "You do not have permission to do that here.");
  eq(describeError(404, { code: 12345, message: "Something else" }).message, "Something else");
});

test("newNonce: unique, digits only, at most 25 characters", () => {
  const seen = new Set<string>();
  for (let i = 0; i < 5000; i++) {
    const n = newNonce();
    if (!/^\d{1,25}$/.test(n)) throw new Error("bad nonce " + n);
    if (seen.has(n)) throw new Error("duplicate nonce " + n);
    seen.add(n);
  }
});

test("addMessage: the server copy replaces the optimistic one by nonce", () => {
  const s = new State();
  s.log("10").items.push(msg("pending-77", { nonce: "77", pending: true }));
  s.addMessage(msg("5"));
  s.addMessage(msg("6", { nonce: "77" }));
  eq(s.log("10").items.map((m) => m.id), ["5", "6"]);
  // The REST answer arriving after the gateway copy adds nothing.
  s.addMessage(msg("6", { nonce: "77" }));
  eq(s.log("10").items.length, 2);
});

test("addMessage: keeps id order, pending last; ignores live messages off the present", () => {
  const s = new State();
  const l = s.log("10");
  l.items.push(msg("pending-1", { nonce: "1", pending: true }));
  s.addMessage(msg("20"));
  s.addMessage(msg("15"));
  eq(l.items.map((m) => m.id), ["15", "20", "pending-1"]);
  l.atEnd = false;
  eq(s.addMessage(msg("30")), false);
  eq(l.items.length, 3);
});

test("unread and mention labels", () => {
  const s = state;
  s.putChannel({ id: "50", type: 0, name: "general", position: 0, guild_id: undefined as any, last_message_id: "200" });
  s.reads.set("50", { last_message_id: "100", mention_count: 0 });
  eq(channelLabel(s.channels.get("50")!), "general (unread)");
  s.reads.set("50", { last_message_id: "100", mention_count: 2 });
  eq(channelLabel(s.channels.get("50")!), "general (unread), 2 mentions");
  s.reads.set("50", { last_message_id: "200", mention_count: 0 });
  eq(channelLabel(s.channels.get("50")!), "general");
  s.removeChannel("50");
});

test("threads: listed under their parent, archived ones left out, a new GUILD_CREATE's replace the active ones", () => {
  const st = new State();
  st.putGuild({ id: "1", name: "g", owner_id: "2", roles: [], channels: [{ id: "5", type: 0, name: "general", position: 0 }] });
  const thread = (id: string, last: string, archived = false) =>
    st.putChannel({ id, type: 11, guild_id: "1", parent_id: "5", name: "t" + id, position: 0, last_message_id: last,
      thread_metadata: { archived } });
  thread("7", "70");
  thread("8", "90");
  thread("9", "95", true);
  eq(st.threadsOf("5").map((c) => c.id), ["8", "7"], "active threads, most recent first");
  eq(st.guildChannels("1").map((c) => c.id), ["5"], "threads are not channels of the sidebar's list");
  // A second GUILD_CREATE lists the active threads the user sees (with
  // the thread member when joined): those it lists stay, an active one it
  // does not list (deleted, or no longer visible) goes, archived ones
  // learnt elsewhere stay.
  st.putGuild({ id: "1", name: "g", owner_id: "2", roles: [], channels: [{ id: "5", type: 0, name: "general", position: 0 }],
    threads: [{ id: "8", type: 11, parent_id: "5", name: "t8", position: 0, last_message_id: "90", thread_metadata: { archived: false },
      member: { id: "8", user_id: "2", join_timestamp: "2026-12-02T00:00:00Z", flags: 0 } }] });
  eq(st.threadsOf("5").map((c) => c.id), ["8"], "active threads after a second GUILD_CREATE");
  eq(!!st.channels.get("8")?.member, true, "the joined thread keeps its thread member");
  eq(st.channels.has("9"), true, "an archived thread stays");
  thread("7", "70");
  st.removeChannel("8");
  eq(st.threadsOf("5").map((c) => c.id), ["7"], "after THREAD_DELETE");
});

test("member list ops: SYNC, INSERT, UPDATE, DELETE, INVALIDATE", () => {
  const mem = (id: string) => ({ member: { user: { id, username: "u" + id }, roles: [] } });
  applyMemberList({ guild_id: "7", id: "everyone", groups: [{ id: "online", count: 2 }], ops: [
    { op: "SYNC", range: [0, 99], items: [{ group: { id: "online", count: 2 } }, mem("1"), mem("2")] },
  ] });
  const ids = () => state.memberLists.get("7")!.items.map((it) => it?.group?.id ?? it?.member?.user?.id ?? null);
  eq(ids(), ["online", "1", "2"]);
  applyMemberList({ guild_id: "7", id: "everyone", ops: [{ op: "INSERT", index: 2, item: mem("3") }] });
  eq(ids(), ["online", "1", "3", "2"]);
  applyMemberList({ guild_id: "7", id: "everyone", ops: [{ op: "UPDATE", index: 1, item: mem("4") }, { op: "DELETE", index: 3 }] });
  eq(ids(), ["online", "4", "3"]);
  applyMemberList({ guild_id: "7", id: "everyone", ops: [{ op: "INVALIDATE", range: [1, 2] }] });
  eq(ids(), ["online", null, null]);
  // A new list id (another visibility group) starts over.
  applyMemberList({ guild_id: "7", id: "other", ops: [{ op: "SYNC", range: [0, 99], items: [mem("9")] }] });
  eq(ids(), ["9"]);
});

test("live: reaction bursts on a log scale, capped at 20 a second", () => {
  eq([0, 1, 10, 100, 1000, 1e6].map(burstsFor), [0, 2, 5, 9, 13, 20]);
  for (let n = 1; n < 1e5; n *= 3) if (burstsFor(n * 3) < burstsFor(n)) throw new Error("not monotonic at " + n);
});

test("live: user id from a token's first part", () => {
  eq(userIdFromToken(btoa("1577323102084268032").replace(/=+$/, "") + ".AAAA.sig"), "1577323102084268032");
  eq(userIdFromToken("not a token"), null);
  eq(userIdFromToken(null), null);
});

test("live: comments merge by id in seq order; retractions remove", () => {
  const s = new LiveSession("5", null, () => {});
  const c = (id: string, seq: number) => ({ id, stream_id: "5", seq, author: { id: "1", username: "a" }, text: "t" + id, video_ts_ms: 0, created_at: "" });
  s.addComment(c("30", 3));
  s.addComment(c("10", 1));
  s.addComment(c("20", 2));
  s.addComment(c("20", 2)); // a resume never repeats, but a poll may
  eq(s.items.map((i) => i.c.id), ["10", "20", "30"]);
  const key = s.items[1].key;
  s.addComment({ ...c("20", 2), text: "edited copy" });
  eq(s.items[1].key, key, "same row");
  s.remove("20");
  eq(s.items.map((i) => i.c.id), ["10", "30"]);
});

test("live: the state event says when the stream is sampled, and when it is no longer", () => {
  const s = new LiveSession("5", null, () => {});
  s.stream = { id: "5", creator_id: "1", title: "t", state: "live", started_at: "", ended_at: null, viewers: 0, sampled: false } as any;
  (s as any).onState({ state: "live", sampled: true });
  eq(s.stream!.sampled, true);
  (s as any).onState({ state: "live", sampled: false, report_p: 0.5 });
  eq(s.stream!.sampled, false);
});

test("voice: a new VOICE_SERVER_UPDATE moves the call to the new endpoint", () => {
  class FakeWS {
    static OPEN = 1;
    static all: FakeWS[] = [];
    readyState = 1;
    sent: any[] = [];
    closed = false;
    onmessage: ((ev: any) => void) | null = null;
    onclose: ((ev: any) => void) | null = null;
    constructor(public url: string) {
      FakeWS.all.push(this);
    }
    send(s: string) {
      this.sent.push(JSON.parse(s));
    }
    close() {
      this.closed = true;
    }
    hello() {
      this.onmessage!({ data: JSON.stringify({ op: 8, d: { heartbeat_interval: 41250 } }) });
    }
  }
  const real = window.WebSocket;
  (window as any).WebSocket = FakeWS;
  try {
    state.me = { id: "9", username: "me" };
    const v = new VoiceClient(() => {});
    Object.assign(v as any, { phase: "joining", guildId: "1", channelId: "2", mic: new MediaStream() });
    v.onDispatch("VOICE_SERVER_UPDATE", { guild_id: "1", token: "t1", endpoint: "a.example:443" });
    eq(FakeWS.all.length, 0, "no socket before our session id");
    v.onDispatch("VOICE_STATE_UPDATE", { guild_id: "1", channel_id: "2", user_id: "9", session_id: "s1" });
    eq(FakeWS.all.map((w) => w.url), ["wss://a.example:443/?v=8"]);
    FakeWS.all[0].hello();
    eq(FakeWS.all[0].sent[0], { op: 0, d: { server_id: "1", user_id: "9", session_id: "s1", token: "t1", max_dave_protocol_version: 0 } });
    v.onDispatch("VOICE_SERVER_UPDATE", { guild_id: "1", token: "t2", endpoint: "b.example:443" });
    eq(FakeWS.all[0].closed, true, "old socket closed");
    eq(FakeWS.all.map((w) => w.url), ["wss://a.example:443/?v=8", "wss://b.example:443/?v=8"]);
    FakeWS.all[1].hello();
    eq(FakeWS.all[1].sent[0].d.token, "t2");
    eq(v.phase, "reconnecting");
    // Another guild's update is not ours.
    v.onDispatch("VOICE_SERVER_UPDATE", { guild_id: "3", token: "x", endpoint: "c.example:443" });
    eq(FakeWS.all.length, 2);
    v.leave();
    eq(v.phase, "idle");
  } finally {
    (window as any).WebSocket = real;
    state.me = null;
  }
});

test("stand-in list: the pane's names and rows, only for a message list, removed by dropStandIn", () => {
  const c = { id: "10", type: 0, guild_id: "1", name: "general", position: 0 };
  const bob = { id: "2", username: "bob" };
  // The API's order: newest first.
  const page = [
    msg("12", { author: bob, content: "hi <@1> see https://example.com/x.", mentions: [{ id: "1", username: "a", global_name: "Alice" }] }),
    msg("11", { edited_timestamp: "2026-01-01T00:00:01+00:00", reactions: [{ count: 2, me: false, emoji: { id: null, name: "👍" } }] }),
  ];
  try {
    eq(paintStandIn({ ...c, type: 2 }, page, true), false, "a voice channel");
    eq(paintStandIn(c, [], true), false, "no messages");
    eq(standInChannel(), null);
    eq(paintStandIn(c, page, true), true, "painted");
    eq(paintStandIn(c, page, true), false, "painted once");
    eq(standInChannel(), "10");
    const lists = document.querySelectorAll('ol[aria-label="Messages in #general"]');
    eq(lists.length, 1);
    const rows = Array.from(lists[0].children).map((li) => [
      li.getAttribute("data-id"),
      li.querySelector(".author")?.textContent,
      li.querySelector(".content")?.textContent,
      li.querySelector(".content")?.getAttribute("elementtiming"),
    ]);
    eq(rows, [
      ["11", "a", "m11 (edited)", "message"],
      ["12", "bob", "hi @Alice see https://example.com/x.", "message"],
    ]);
    eq(lists[0].querySelector(".reaction")?.textContent, "👍 2");
    eq(document.querySelector("#boot .start")?.textContent, "This is the beginning of #general.");
    eq(document.documentElement.classList.contains("booting"), true, "#app hidden");
    eq(document.querySelector("#boot")!.querySelectorAll("button, input, textarea, a[href]").length, 0, "controls");
    eq([...standInHeights().keys()], ["11", "12"]);
  } finally {
    dropStandIn();
  }
  eq(standInChannel(), null);
  eq(document.getElementById("boot"), null);
  eq(document.documentElement.classList.contains("booting"), false);
});

const results: { name: string; error?: string }[] = [];
for (const [name, fn] of tests) {
  try {
    fn();
    results.push({ name });
  } catch (e) {
    results.push({ name, error: String((e as Error).message || e) });
  }
}
(window as any).__results = results;
