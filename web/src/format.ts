// Text formatting shared by the message list (ui/Messages.tsx,
// ui/Content.tsx) and the boot script's stand-in list (standin.ts), so that
// both show a message the same way.


// displayName is how a user is named: the member's nick, else the
// global name, else the username.
export function displayName(u: { username: string; global_name?: string | null } | undefined, m?: { nick?: string | null }): string {
  if (m?.nick) return m.nick;
  if (!u) return "unknown";
  return u.global_name || u.username;
}

// MENTION_TOKEN matches what a message's text shows other than as text:
// user, role and channel mentions, @everyone/@here, and links.
export const MENTION_TOKEN = /<@!?(\d+)>|<@&(\d+)>|<#(\d+)>|(@everyone|@here)|(https?:\/\/[^\s<]+[^\s<.,:;"')\]!?])/g;

// Formatters are built once: toLocale*String builds one per call, which
// costs more than rendering the message.
let hhmm: Intl.DateTimeFormat | undefined;
let day: Intl.DateTimeFormat | undefined;

// messageTime is a message's time as the list shows it: the time of day,
// with the date when it is not today.
export function messageTime(ts: string): string {
  hhmm ??= new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit" });
  day ??= new Intl.DateTimeFormat(undefined, { year: "numeric", month: "numeric", day: "numeric" });
  const d = new Date(ts);
  const t = hhmm.format(d);
  return day.format(d) === day.format(Date.now()) ? t : day.format(d) + " " + t;
}
