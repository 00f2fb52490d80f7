import { h } from "preact";
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import {
  deleteMessage,
  discardSend,
  editMessage,
  loadAround,
  loadNewer,
  loadNewest,
  loadOlder,
  retrySend,
  setViewing,
} from "../client";
import { state } from "../state";
import type { Channel, Message } from "../types";
import { displayName, Perm } from "../types";
import { Composer } from "./Composer";
import { Content } from "./Content";
import { can } from "./perms";
import { ChannelPermissions } from "./Settings";

// Formatters are built once: toLocale*String builds one per call, which
// costs more than rendering the message.
const hhmm = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit" });
const day = new Intl.DateTimeFormat(undefined, { year: "numeric", month: "numeric", day: "numeric" });

function time(ts: string): string {
  const d = new Date(ts);
  const t = hhmm.format(d);
  return day.format(d) === day.format(Date.now()) ? t : day.format(d) + " " + t;
}

export function channelTitle(c: Channel): string {
  return (c.guild_id ? "#" : "@") + state.channelName(c);
}

function MessageItem(props: {
  m: Message;
  channel: Channel;
  highlight: boolean;
  onReply: (m: Message) => void;
}) {
  const { m, channel } = props;
  const [editing, setEditing] = useState(false);
  const [draft, setDraft] = useState(m.content);
  const [confirming, setConfirming] = useState(false);
  const mine = m.author.id === state.me?.id;
  const real = !m.id.startsWith("pending-");
  const canDelete = mine || can(channel.guild_id, Perm.ManageMessages);
  const author = displayName(m.author, m.member || state.member(channel.guild_id, m.author.id));
  const ref = m.referenced_message;
  const nonce = m.nonce !== undefined ? String(m.nonce) : "";
  return (
    <li
      class={"msg" + (m.pending ? " pending" : "") + (m.failed ? " failed" : "") + (props.highlight ? " highlight" : "")}
      id={real ? `msg-${m.id}` : undefined}
      data-id={m.id}
    >
      {ref && (
        <div class="reply-ref">
          ↪ <span class="author">{displayName(ref.author)}</span> <span class="snippet">{ref.content.slice(0, 80)}</span>
        </div>
      )}
      {m.message_reference && !ref && m.type === 19 && <div class="reply-ref">↪ original message was deleted</div>}
      <div class="meta">
        <span class="author">{author}</span>
        <time dateTime={m.timestamp}>{time(m.timestamp)}</time>
        {m.pending && <span class="status">sending…</span>}
      </div>
      {editing ? (
        <textarea
          class="edit"
          aria-label="Edit message"
          value={draft}
          ref={(el) => el?.focus()}
          onInput={(e) => setDraft((e.target as HTMLTextAreaElement).value)}
          onKeyDown={(e) => {
            if (e.key === "Escape") {
              setEditing(false);
              setDraft(m.content);
            } else if (e.key === "Enter" && !e.shiftKey) {
              e.preventDefault();
              setEditing(false);
              if (draft.trim() && draft !== m.content) editMessage(channel.id, m.id, draft);
            }
          }}
        />
      ) : (
        <div class="content">
          <Content m={m} />
          {m.edited_timestamp && <span class="edited"> (edited)</span>}
        </div>
      )}
      {m.failed && (
        <div class="send-error" role="alert">
          Not sent: {m.failed}{" "}
          <button class="small" onClick={() => retrySend(nonce)}>
            Retry
          </button>{" "}
          <button class="small" onClick={() => discardSend(nonce)}>
            Discard
          </button>
        </div>
      )}
      {real && !editing && (
        <div class="actions">
          <button class="small" onClick={() => props.onReply(m)} aria-label={`Reply to ${author}`}>
            Reply
          </button>
          <button
            class="small"
            onClick={() => {
              const link = `${location.origin}/channels/${channel.guild_id || "@me"}/${channel.id}/${m.id}`;
              navigator.clipboard?.writeText(link).then(
                () => state.toast("Message link copied."),
                () => state.toast(link),
              );
            }}
          >
            Copy Link
          </button>
          {mine && (
            <button
              class="small"
              onClick={() => {
                setDraft(m.content);
                setEditing(true);
              }}
            >
              Edit
            </button>
          )}
          {canDelete && !confirming && (
            <button class="small danger" onClick={() => setConfirming(true)}>
              Delete
            </button>
          )}
          {confirming && (
            <span class="confirm">
              Delete this message?{" "}
              <button class="small danger" onClick={() => deleteMessage(channel.id, m.id)}>
                Yes, delete
              </button>{" "}
              <button class="small" onClick={() => setConfirming(false)}>
                Cancel
              </button>
            </span>
          )}
        </div>
      )}
    </li>
  );
}

// The message list renders a window of the loaded history, not all of
// it, so a tab that scrolled back through 10,000 messages keeps a few
// hundred in the DOM. Following the present it shows the last WINDOW;
// scrolling moves the window by STEP, never wider than MAX.
const WINDOW = 150;
const MAX = 300;
const STEP = 50;

// MessagePane is a channel's history and composer. It opens on the newest
// page (or around a linked message), loads older pages as the list
// scrolls up, and keeps the view pinned to the bottom while it is there.
// Whatever changes above or below, the first message in view stays where
// it was on screen (an anchor, restored after each render).
export function MessagePane(props: { channel: Channel; jumpTo: string | null }) {
  const { channel } = props;
  const log = state.log(channel.id);
  const scroller = useRef<HTMLDivElement>(null);
  const list = useRef<HTMLOListElement>(null);
  const pinned = useRef(true);
  const jumped = useRef(false);
  // win holds the window's first and last message ids (null end: the
  // window follows the newest message; null start: WINDOW before the end).
  const win = useRef<{ start: string | null; end: string | null }>({ start: null, end: null });
  const idx = useRef({ start: 0, end: 0 });
  const anchor = useRef<{ id: string; offset: number } | null>(null);
  const [, rerender] = useState(0);
  const [replyTo, setReplyTo] = useState<Message | null>(null);
  const [editPerms, setEditPerms] = useState(false);

  useEffect(() => {
    pinned.current = !props.jumpTo;
    jumped.current = false;
    win.current = { start: null, end: null };
    anchor.current = null;
    setReplyTo(null);
    if (props.jumpTo) loadAround(channel.id, props.jumpTo);
    else if (!log.atEnd || (log.items.length === 0 && !log.loading) || log.error) loadNewest(channel.id);
    return () => setViewing(null, false);
  }, [channel.id, props.jumpTo]);

  const items = log.items;
  let endIdx = items.length;
  if (win.current.end !== null) {
    const i = items.findIndex((m) => m.id === win.current.end);
    if (i >= 0) endIdx = i + 1;
    else win.current.end = null;
  }
  let startIdx = Math.max(0, endIdx - WINDOW);
  if (win.current.start !== null) {
    const i = items.findIndex((m) => m.id === win.current.start);
    if (i >= 0 && i < endIdx) startIdx = i;
    else win.current.start = null;
  }
  if (pinned.current && endIdx - startIdx > MAX) {
    startIdx = endIdx - MAX;
    win.current.start = null;
  }
  idx.current = { start: startIdx, end: endIdx };
  const shown = items.slice(startIdx, endIdx);
  const atPresent = endIdx === items.length && log.atEnd;

  const saveAnchor = () => {
    const el = scroller.current;
    const ol = list.current;
    if (!el || !ol) return;
    for (const li of Array.from(ol.children) as HTMLElement[]) {
      if (li.offsetTop + li.offsetHeight > el.scrollTop && li.dataset.id && !li.dataset.id.startsWith("pending-")) {
        anchor.current = { id: li.dataset.id, offset: li.offsetTop - el.scrollTop };
        return;
      }
    }
    anchor.current = null;
  };

  const extendUp = () => {
    const { start, end } = idx.current;
    if (start === 0) return false;
    const ns = Math.max(0, start - STEP);
    win.current.start = items[ns].id;
    if (end - ns > MAX) win.current.end = items[ns + MAX - 1].id;
    rerender((n) => n + 1);
    return true;
  };

  const extendDown = () => {
    const { start, end } = idx.current;
    if (end >= items.length) return false;
    const ne = Math.min(items.length, end + STEP);
    win.current.end = ne === items.length ? null : items[ne - 1].id;
    if (ne - start > MAX) win.current.start = items[ne - MAX].id;
    rerender((n) => n + 1);
    return true;
  };

  useLayoutEffect(() => {
    const el = scroller.current;
    if (!el) return;
    if (pinned.current) {
      el.scrollTop = el.scrollHeight;
    } else if (props.jumpTo && !jumped.current && items.some((m) => m.id === props.jumpTo)) {
      jumped.current = true;
      document.getElementById(`msg-${props.jumpTo}`)?.scrollIntoView({ block: "center" });
    } else if (anchor.current) {
      const a = list.current?.querySelector(`[data-id="${anchor.current.id}"]`) as HTMLElement | null;
      if (a) el.scrollTop = a.offsetTop - anchor.current.offset;
    }
    saveAnchor();
    setViewing(channel.id, pinned.current && atPresent);
    // Near the top with more loaded above: show it. Nothing to scroll yet:
    // fetch older pages until the pane fills.
    if (el.scrollTop < 400 && !pinned.current && extendUp()) return;
    if (el.scrollHeight <= el.clientHeight && !log.reachedStart && !log.loading && items.length > 0) loadOlder(channel.id);
  });

  const onScroll = () => {
    const el = scroller.current;
    if (!el) return;
    const fromBottom = el.scrollHeight - el.scrollTop - el.clientHeight;
    pinned.current = fromBottom < 40 && idx.current.end === log.items.length && log.atEnd;
    saveAnchor();
    if (el.scrollTop < 400 && !extendUp() && !log.reachedStart && !log.loading) loadOlder(channel.id);
    if (fromBottom < 400 && !extendDown() && !log.atEnd && !log.loading) loadNewer(channel.id);
    setViewing(channel.id, pinned.current && log.atEnd && idx.current.end === log.items.length);
  };

  const title = channelTitle(channel);
  return (
    <section class="pane" aria-label={title}>
      <header class="pane-head">
        <h2>{title}</h2>
        {channel.topic && <span class="topic">{channel.topic}</span>}
        {channel.guild_id && can(channel.guild_id, Perm.ManageRoles) && (
          <button class="small push" onClick={() => setEditPerms(true)}>
            Channel Permissions
          </button>
        )}
      </header>
      {editPerms && <ChannelPermissions channel={channel} onClose={() => setEditPerms(false)} />}
      <div class="scroller" ref={scroller} onScroll={onScroll}>
        {log.reachedStart && startIdx === 0 && items.length > 0 && (
          <p class="start">This is the beginning of {title}.</p>
        )}
        {log.loading && (
          <p class="loading" role="status">
            Loading messages…
          </p>
        )}
        {log.error && (
          <p class="error" role="alert">
            {log.error}
          </p>
        )}
        <ol class="messages" aria-label={`Messages in ${title}`} ref={list}>
          {shown.map((m) => (
            <MessageItem key={m.id} m={m} channel={channel} highlight={m.id === props.jumpTo} onReply={setReplyTo} />
          ))}
        </ol>
        {!log.loading && log.items.length === 0 && !log.error && <p class="empty">No messages yet. Say hello!</p>}
      </div>
      {!atPresent && (
        <button
          class="jump"
          onClick={() => {
            pinned.current = true;
            win.current = { start: null, end: null };
            if (log.atEnd) rerender((n) => n + 1);
            else loadNewest(channel.id);
          }}
        >
          Jump to present
        </button>
      )}
      <Composer channel={channel} title={title} replyTo={replyTo} clearReply={() => setReplyTo(null)} />
    </section>
  );
}
