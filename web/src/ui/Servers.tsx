import { h } from "preact";
import { firstTextChannel } from "../client";
import { linkClick } from "../router";
import { state } from "../state";
import { ChannelType } from "../types";

function initials(name: string): string {
  const words = name.trim().split(/\s+/).filter(Boolean);
  return (words.length > 1 ? words.slice(0, 3).map((w) => [...w][0]).join("") : [...name].slice(0, 2).join("")) || "?";
}

// Servers is the guild rail. Each entry's accessible name is the guild's
// name; unread and mention state are shown beside it.
export function Servers(props: { guildId: string | null; onDialog: (d: string) => void }) {
  let dmMentions = 0;
  let dmUnread = false;
  for (const c of state.privateChannels()) {
    if (state.isUnread(c)) {
      dmUnread = true;
      dmMentions++;
    }
  }
  return (
    <nav class="servers" aria-label="Servers">
      <ul>
        <li class={props.guildId === null ? "active" : ""}>
          <a
            href="/channels/@me"
            onClick={linkClick}
            aria-label="Direct Messages"
            aria-current={props.guildId === null ? "page" : undefined}
            class="pill home"
            title="Direct Messages"
          >
            <span aria-hidden="true">DM</span>
            {dmUnread && dmMentions > 0 && <span class="badge" aria-hidden="true">{dmMentions}</span>}
          </a>
        </li>
        <li class="sep" aria-hidden="true" />
        {state.guildOrder.map((id) => {
          const g = state.guilds.get(id);
          if (!g) return null;
          const { unread, mentions } = state.guildUnread(id);
          const first = firstTextChannel(id) || state.guildChannels(id).find((c) => c.type !== ChannelType.GuildCategory);
          const active = props.guildId === id;
          return (
            <li key={id} class={(active ? "active " : "") + (unread ? "unread" : "")}>
              <a
                href={`/channels/${id}${first ? "/" + first.id : ""}`}
                onClick={linkClick}
                aria-label={g.name}
                aria-current={active ? "page" : undefined}
                title={g.name}
                class="pill"
              >
                <span aria-hidden="true">{initials(g.name)}</span>
                {mentions > 0 && (
                  <span class="badge" aria-hidden="true">
                    {mentions}
                  </span>
                )}
              </a>
            </li>
          );
        })}
        <li>
          <button class="pill add" title="Add a Server" aria-label="Add a Server" onClick={() => props.onDialog("create-guild")}>
            <span aria-hidden="true">+</span>
          </button>
        </li>
        <li>
          <button class="pill add" title="Join a Server" aria-label="Join a Server" onClick={() => props.onDialog("join")}>
            <span aria-hidden="true">⤵</span>
          </button>
        </li>
      </ul>
    </nav>
  );
}
