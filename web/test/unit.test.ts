// Unit tests of the client's logic, run in Chromium by web/unit_test.go
// (they need a DOM, and no Node is involved). Each test throws on failure;
// the page publishes the results in window.__results.

import { describeError, newNonce } from "../src/api";
import { applyMemberList } from "../src/client";
import { State, state } from "../src/state";
import type { Message } from "../src/types";
import { compareIds } from "../src/types";
import { channelLabel } from "../src/ui/Sidebar";

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
