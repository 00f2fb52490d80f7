import { h, type ComponentChild } from "preact";
import { state } from "../state";
import type { Message } from "../types";
import { displayName } from "../types";
import { MENTION_TOKEN } from "../format";


// Content renders a message's text: mentions as names, links as links.
// Everything else is text (Preact escapes it), never HTML.
export function Content(props: { m: Message }) {
  const { m } = props;
  const out: ComponentChild[] = [];
  let last = 0;
  for (const match of m.content.matchAll(MENTION_TOKEN)) {
    const i = match.index ?? 0;
    if (i > last) out.push(m.content.slice(last, i));
    last = i + match[0].length;
    const [, user, role, channel, everyone, url] = match;
    if (user) {
      const u = m.mentions?.find((x) => x.id === user) || state.users.get(user);
      out.push(
        <span class={"mention" + (user === state.me?.id ? " me" : "")}>@{u ? displayName(u, state.member(m.guild_id, user)) : "unknown-user"}</span>,
      );
    } else if (role) {
      const guildId = m.guild_id || state.channels.get(m.channel_id)?.guild_id;
      const r = guildId ? state.guilds.get(guildId)?.roles.find((x) => x.id === role) : undefined;
      out.push(<span class="mention">@{r ? r.name : "deleted-role"}</span>);
    } else if (channel) {
      const c = state.channels.get(channel);
      out.push(<span class="mention">#{c ? state.channelName(c) : "unknown"}</span>);
    } else if (everyone) {
      out.push(<span class={m.mention_everyone ? "mention me" : ""}>{everyone}</span>);
    } else if (url) {
      out.push(
        <a href={url} target="_blank" rel="noopener noreferrer nofollow">
          {url}
        </a>,
      );
    }
  }
  if (last < m.content.length) out.push(m.content.slice(last));
  return <span class="text">{out}</span>;
}
