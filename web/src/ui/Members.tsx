import { h } from "preact";
import { useRef, useState } from "preact/hooks";
import { openDM, requestMembers } from "../client";
import { navigate } from "../router";
import { state } from "../state";
import type { Channel, User } from "../types";
import { displayName } from "../types";

const ROW = 34; // px per row, for mapping scroll position to op 14 ranges

interface Row {
  key: string;
  group?: string;
  user?: User;
  name?: string;
  status?: string;
}

function groupName(guildId: string, id: string, count: number): string {
  const base = id === "online" ? "Online" : id === "offline" ? "Offline" : state.guilds.get(guildId)?.roles.find((r) => r.id === id)?.name || "Role";
  return `${base} — ${count}`;
}

// rows are the member list's rows: from the server's op 14 list when it
// sent one (grouped by hoisted role, online, offline), else from the
// members GUILD_CREATE carried.
function rows(channel: Channel): Row[] {
  const out: Row[] = [];
  if (!channel.guild_id) {
    const people = [...(channel.recipients || [])];
    if (state.me && !people.some((u) => u.id === state.me!.id)) people.push(state.me);
    out.push({ key: "g", group: `Members — ${people.length}` });
    for (const u of people) out.push({ key: u.id, user: u, name: displayName(u), status: state.presences.get(u.id) || "offline" });
    return out;
  }
  const gid = channel.guild_id;
  const list = state.memberLists.get(gid);
  if (list && list.items.length > 0) {
    list.items.forEach((it, i) => {
      if (!it) out.push({ key: "x" + i });
      // A header's count comes from the update's groups, which every
      // update carries whole; the header item itself is only re-sent
      // when it moves.
      else if (it.group) {
        const n = list.groups.find((g) => g.id === it.group!.id)?.count ?? it.group.count;
        out.push({ key: "g" + it.group.id, group: groupName(gid, it.group.id, n) });
      }
      else if (it.member?.user) {
        const u = state.users.get(it.member.user.id) || it.member.user;
        out.push({
          key: u.id,
          user: u,
          name: displayName(u, it.member),
          status: state.presences.get(u.id) || it.member.presence?.status || "offline",
        });
      }
    });
    return out;
  }
  const g = state.guilds.get(gid);
  if (!g) return out;
  const online: Row[] = [];
  const offline: Row[] = [];
  for (const [id, m] of g.members) {
    const u = state.users.get(id) || m.user;
    if (!u) continue;
    const status = state.presences.get(id) || "offline";
    (status === "offline" ? offline : online).push({ key: id, user: u, name: displayName(u, m), status });
  }
  const byName = (a: Row, b: Row) => (a.name || "").localeCompare(b.name || "");
  if (online.length) out.push({ key: "gon", group: `Online — ${online.length}` }, ...online.sort(byName));
  if (offline.length) out.push({ key: "goff", group: `Offline — ${offline.length}` }, ...offline.sort(byName));
  return out;
}

export function Members(props: { channel: Channel }) {
  const { channel } = props;
  const [open, setOpen] = useState<string | null>(null);
  const [error, setError] = useState("");
  const sent = useRef("");
  const all = rows(channel);

  // As the list scrolls, ask for the 100-row windows in view (op 14).
  const onScroll = (e: Event) => {
    if (!channel.guild_id) return;
    const el = e.currentTarget as HTMLElement;
    const first = Math.floor(el.scrollTop / ROW);
    const last = Math.ceil((el.scrollTop + el.clientHeight) / ROW);
    const ranges: number[][] = [[0, 99]];
    for (let k = Math.floor(first / 100); k <= Math.floor(last / 100); k++) if (k > 0) ranges.push([k * 100, k * 100 + 99]);
    const key = JSON.stringify(ranges);
    if (key !== sent.current) {
      sent.current = key;
      requestMembers(channel.guild_id, channel.id, ranges);
    }
  };

  const dm = async (u: User) => {
    setError("");
    try {
      const c = await openDM([u.id]);
      navigate(`/channels/@me/${c.id}`);
    } catch (e) {
      setError((e as Error).message);
    }
  };

  return (
    <aside class="members" onScroll={onScroll}>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      <ul aria-label="Members">
        {all.map((r) =>
          r.group ? (
            <li key={r.key} class="group" aria-hidden="false">
              {r.group}
            </li>
          ) : r.user ? (
            <li key={r.key} class="member">
              <button class="member-btn" onClick={() => setOpen(open === r.key ? null : r.key)} aria-expanded={open === r.key}>
                <span class={"dot " + r.status} title={r.status} aria-hidden="true" />
                <span class="name">{r.name}</span>
                <span class="sr">, {r.status}</span>
                {r.user.bot && <span class="tag">BOT</span>}
              </button>
              {open === r.key && r.user.id !== state.me?.id && (
                <div class="popover">
                  <button class="small" onClick={() => dm(r.user!)}>
                    Message
                  </button>
                </div>
              )}
            </li>
          ) : (
            <li key={r.key} class="member placeholder" aria-hidden="true" />
          ),
        )}
      </ul>
    </aside>
  );
}
