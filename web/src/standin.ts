// The stand-in message list: the boot script (boot.ts) paints a channel
// URL's newest messages from its own REST reads with a few DOM calls, as
// soon as they are answered, instead of waiting for the bundle to be
// fetched, compiled and run and for Preact to render the whole pane. It
// has the pane's classes and layout (so the bundle's pane replaces it
// without moving a row) and its accessible names: the list "Messages in
// #<channel>" with each row's author and text. It is read-only: the
// composer and the rows' buttons come with the bundle.
//
// While it is shown, the bundle renders into #app hidden (visibility, so
// that its layout can be measured; hidden content is out of the
// accessibility tree, so no name is ever there twice), and the App
// removes the stand-in and shows #app in the same commit that puts its own
// rows in the DOM (dropStandIn).
//
// Imported by the inline boot script: keep it small and free of anything
// heavy.

import { displayName, MENTION_TOKEN, messageTime } from "./format";
import type { Channel, Message } from "./types";

// The channel and message types of types.ts, written out: importing that
// module would bring more into the inline script than these numbers.
const GuildText = 0;
const GuildAnnouncement = 5;
const Reply = 19;
const ThreadCreated = 18;
const ThreadStarter = 21;

const ID = "boot";
// BOOTING on <html> hides #app while the stand-in is shown.
const BOOTING = "booting";

// painted lists the channel types whose pane is a message list, as the
// App renders it before READY (guild text, announcement, threads).
const painted: number[] = [GuildText, GuildAnnouncement, 10, 11, 12];

type Attrs = Record<string, string>;

function el(tag: string, cls?: string, text?: string, attrs?: Attrs): HTMLElement {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  if (attrs) for (const k in attrs) e.setAttribute(k, attrs[k]);
  return e;
}

function add(parent: Node, ...kids: Node[]): void {
  for (const k of kids) parent.appendChild(k);
}

// text renders a message's content as ui/Content.tsx does before READY:
// mentions by name (from the message's mentions), links as text in the
// link's colour, everything else as text.
function text(m: Message, c: Channel): HTMLElement {
  const out = el("span", "text");
  let last = 0;
  for (const match of m.content.matchAll(MENTION_TOKEN)) {
    const i = match.index ?? 0;
    if (i > last) add(out, document.createTextNode(m.content.slice(last, i)));
    last = i + match[0].length;
    const [, user, role, channel, everyone, url] = match;
    if (user) {
      const u = m.mentions?.find((x) => x.id === user);
      add(out, el("span", "mention", "@" + (u ? displayName(u) : "unknown-user")));
    } else if (role) {
      add(out, el("span", "mention", "@deleted-role"));
    } else if (channel) {
      add(out, el("span", "mention", "#" + (channel === c.id ? c.name : "unknown")));
    } else if (everyone) {
      add(out, el("span", m.mention_everyone ? "mention me" : "", everyone));
    } else if (url) {
      const a = el("a", "", url);
      add(out, a);
    }
  }
  if (last < m.content.length) add(out, document.createTextNode(m.content.slice(last)));
  return out;
}

// row is one message as ui/Messages.tsx's MessageItem lays it out, without
// its buttons.
function row(m: Message, c: Channel): HTMLElement {
  const li = el("li", "msg", undefined, { "data-id": m.id });
  const author = displayName(m.author, m.member);
  const ref = m.referenced_message;
  if (ref && m.type !== ThreadStarter) {
    const r = el("div", "reply-ref", "↪ ");
    add(r, el("span", "author", displayName(ref.author)), document.createTextNode(" "), el("span", "snippet", ref.content.slice(0, 80)));
    add(li, r);
  } else if (m.message_reference && !ref && m.type === Reply) {
    add(li, el("div", "reply-ref", "↪ original message was deleted"));
  }
  const meta = el("div", "meta");
  add(meta, el("span", "author", author), el("time", "", messageTime(m.timestamp), { datetime: m.timestamp }));
  const body = el("div", "content", undefined, { elementtiming: "message" });
  if (m.type === ThreadCreated) {
    add(body, el("span", "system", `${author} started a thread: ${m.content}`));
  } else if (m.type === ThreadStarter) {
    const s = el("span", "starter");
    if (ref) add(s, el("span", "author", displayName(ref.author)), document.createTextNode(": "), text(ref, c));
    else s.className = "system";
    if (!ref) s.textContent = "The message this thread was started from was deleted.";
    add(body, s);
  } else {
    add(body, text(m, c));
  }
  if (m.edited_timestamp) add(body, el("span", "edited", " (edited)"));
  add(li, meta, body);
  if (m.thread) {
    const chip = el("span", "thread-chip", "🧵 ");
    add(chip, el("span", "", m.thread.name || ""));
    if (m.thread.message_count) add(chip, el("span", "count", `${m.thread.message_count} messages`));
    add(li, chip);
  }
  if (m.reactions?.length) {
    const rs = el("div", "reactions");
    for (const r of m.reactions) add(rs, el("span", "reaction" + (r.me ? " me" : ""), `${r.emoji.name} ${r.count}`));
    add(li, rs);
  }
  return li;
}

// paintStandIn shows the channel's newest page (newest first, as the API
// answers) as the pane will, and reports whether it did: only a message
// list pane with messages is painted.
export function paintStandIn(c: Channel, page: Message[], complete: boolean): boolean {
  if (!c.guild_id || !c.name || !painted.includes(c.type) || page.length === 0 || document.getElementById(ID)) return false;
  const title = "#" + c.name;
  const root = el("div", "app", undefined, { id: ID, "data-channel": c.id });
  const pane = el("section", "pane", undefined, { "aria-label": title });
  // The header's and composer's look only: their names and buttons are the
  // bundle's.
  const head = el("header", "pane-head", undefined, { "aria-hidden": "true" });
  add(head, el("h2", "", title));
  if (c.topic) add(head, el("span", "topic", c.topic));
  if (c.type === GuildText || c.type === GuildAnnouncement) add(head, el("span", "standin-button push", "Threads"));
  const scroller = el("div", "scroller");
  if (complete) add(scroller, el("p", "start", `This is the beginning of ${title}.`));
  const list = el("ol", "messages", undefined, { "aria-label": `Messages in ${title}` });
  for (let i = page.length - 1; i >= 0; i--) add(list, row(page[i], c));
  add(scroller, list);
  const composer = el("div", "composer", undefined, { "aria-hidden": "true" });
  add(composer, el("div", "standin-box", `Message ${title}`), el("div", "typing"));
  add(pane, head, scroller, composer);
  add(root, el("div", "servers"), el("div", "sidebar"), pane);
  document.documentElement.classList.add(BOOTING);
  document.body.prepend(root);
  // Pinned to the newest message, once the stylesheet has laid it out (no
  // frame runs before it has loaded).
  requestAnimationFrame(() => {
    scroller.scrollTop = scroller.scrollHeight;
  });
  performance.mark("concord:standin"); // the stand-in's rows are in the DOM
  return true;
}

// standInChannel is the channel the stand-in shows, or null when none is.
export function standInChannel(): string | null {
  return document.getElementById(ID)?.dataset.channel ?? null;
}

// standInHeights is the height of each of the stand-in's rows by message
// id: the pane's first render places its rows by them.
export function standInHeights(): Map<string, number> {
  const out = new Map<string, number>();
  const root = document.getElementById(ID);
  if (!root) return out;
  for (const li of Array.from(root.querySelectorAll<HTMLElement>("li[data-id]"))) {
    out.set(li.dataset.id!, li.getBoundingClientRect().height);
  }
  return out;
}

// dropStandIn removes the stand-in and shows #app.
export function dropStandIn(): void {
  document.getElementById(ID)?.remove();
  document.documentElement.classList.remove(BOOTING);
}
