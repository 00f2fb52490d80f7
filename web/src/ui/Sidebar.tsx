import { h } from "preact";
import { logout } from "../client";
import { linkClick } from "../router";
import { panels } from "../seams";
import { state } from "../state";
import type { Channel } from "../types";
import { ChannelType, isThread, Perm } from "../types";
import { basePermissions } from "./perms";

// channelLabel is a channel entry's accessible name: its name, then
// " (unread)" and ", N mentions" when they apply.
export function channelLabel(c: Channel): string {
  let s = state.channelName(c);
  if (state.isUnread(c)) s += " (unread)";
  const n = state.mentions(c.id);
  if (n > 0) s += `, ${n} mentions`;
  return s;
}

function ChannelEntry(props: { c: Channel; href: string; active: boolean; activeId?: string | null }) {
  const { c } = props;
  const unread = state.isUnread(c);
  const n = state.mentions(c.id);
  const icon = isThread(c) ? "🧵" : c.type === ChannelType.GuildVoice ? "🔊" : c.guild_id ? "#" : "@";
  // A channel's active threads are listed under it, as Discord's sidebar
  // does.
  const threads = c.guild_id && !isThread(c) ? state.threadsOf(c.id) : [];
  return (
    <li class={"chan" + (isThread(c) ? " thread" : "") + (props.active ? " active" : "") + (unread ? " unread" : "")}>
      <a href={props.href} onClick={linkClick} aria-label={channelLabel(c)} aria-current={props.active ? "page" : undefined}>
        <span class="icon" aria-hidden="true">
          {icon}
        </span>
        <span class="name" aria-hidden="true">
          {state.channelName(c)}
        </span>
        {n > 0 && (
          <span class="badge" aria-hidden="true">
            {n}
          </span>
        )}
      </a>
      {threads.length > 0 && (
        <ul class="threads" aria-label={`Threads in #${state.channelName(c)}`}>
          {threads.map((t) => (
            <ChannelEntry key={t.id} c={t} href={`/channels/${c.guild_id}/${t.id}`} active={t.id === props.activeId} />
          ))}
        </ul>
      )}
    </li>
  );
}

export function GuildSidebar(props: { guildId: string; channelId: string | null; onDialog: (d: string) => void }) {
  const g = state.guilds.get(props.guildId);
  if (!g) return <aside class="sidebar" />;
  const all = state.guildChannels(g.id);
  const cats = all.filter((c) => c.type === ChannelType.GuildCategory);
  const loose = all.filter((c) => c.type !== ChannelType.GuildCategory && !c.parent_id);
  const perms = basePermissions(g.id);
  const admin = (perms & Perm.Administrator) !== 0n;
  const canManage = admin || (perms & Perm.ManageChannels) !== 0n;
  const canInvite = admin || (perms & Perm.CreateInvite) !== 0n;
  const entry = (c: Channel) => (
    <ChannelEntry
      key={c.id}
      c={c}
      href={`/channels/${g.id}/${c.id}`}
      active={c.id === props.channelId}
      activeId={props.channelId}
    />
  );
  return (
    <aside class="sidebar">
      <header class="guild-head">
        <h2>{g.name}</h2>
        <div class="row">
          {canInvite && (
            <button class="small" onClick={() => props.onDialog("invite")}>
              Invite People
            </button>
          )}
          {canManage && (
            <button class="small" onClick={() => props.onDialog("create-channel")}>
              Create Channel
            </button>
          )}
          {(admin || (perms & Perm.ManageRoles) !== 0n) && (
            <button class="small" onClick={() => props.onDialog("settings")}>
              Server Settings
            </button>
          )}
        </div>
      </header>
      <ul class="channels" aria-label="Channels">
        {loose.map(entry)}
        {cats.map((cat) => {
          const kids = all.filter((c) => c.parent_id === cat.id);
          return (
            <li key={cat.id} class="category">
              <span class="cat-name" id={`cat-${cat.id}`}>
                {cat.name}
              </span>
              <ul aria-labelledby={`cat-${cat.id}`}>{kids.map(entry)}</ul>
            </li>
          );
        })}
      </ul>
      <UserBar />
    </aside>
  );
}

export function DMSidebar(props: { channelId: string | null; onDialog: (d: string) => void }) {
  return (
    <aside class="sidebar">
      <header class="guild-head">
        <h2>Direct Messages</h2>
        <div class="row">
          <button class="small" onClick={() => props.onDialog("new-dm")}>
            New Message
          </button>
        </div>
      </header>
      <ul class="channels" aria-label="Channels">
        {state.privateChannels().map((c) => (
          <ChannelEntry key={c.id} c={c} href={`/channels/@me/${c.id}`} active={c.id === props.channelId} />
        ))}
      </ul>
      {state.privateIds.length === 0 && <p class="empty">No conversations yet. Open one from a server's member list.</p>}
      <UserBar />
    </aside>
  );
}

function UserBar() {
  const me = state.me;
  return (
    <div class="userbar">
      {panels.map((P, i) => (
        <P key={i} />
      ))}
      <div class="row">
        <span class={"dot " + (state.conn === "connected" ? "online" : "offline")} aria-hidden="true" />
        <span class="me">{me ? me.global_name || me.username : ""}</span>
        <button class="small" onClick={() => logout()}>
          Log Out
        </button>
      </div>
    </div>
  );
}
