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

// MessagePane is a channel's history and composer. It opens on the newest
// page (or around a linked message), loads older pages as the list
// scrolls up, and keeps the view pinned to the bottom while it is there.
export function MessagePane(props: { channel: Channel; jumpTo: string | null }) {
  const { channel } = props;
  const log = state.log(channel.id);
  const scroller = useRef<HTMLDivElement>(null);
  const pinned = useRef(true);
  const firstId = useRef<string | null>(null);
  const height = useRef(0);
  const [replyTo, setReplyTo] = useState<Message | null>(null);
  const [editPerms, setEditPerms] = useState(false);

  useEffect(() => {
    pinned.current = !props.jumpTo;
    firstId.current = null;
    setReplyTo(null);
    if (props.jumpTo) loadAround(channel.id, props.jumpTo);
    else if (!log.atEnd || (log.items.length === 0 && !log.loading) || log.error) loadNewest(channel.id);
    return () => setViewing(null, false);
  }, [channel.id, props.jumpTo]);

  // After each render: keep the bottom pinned, or keep the same messages
  // in view when an older page was put above them.
  useLayoutEffect(() => {
    const el = scroller.current;
    if (!el) return;
    const first = log.items[0]?.id ?? null;
    if (pinned.current) {
      el.scrollTop = el.scrollHeight;
    } else if (firstId.current !== null && first !== firstId.current) {
      el.scrollTop += el.scrollHeight - height.current;
    } else if (props.jumpTo && firstId.current === null && log.items.length > 0) {
      document.getElementById(`msg-${props.jumpTo}`)?.scrollIntoView({ block: "center" });
    }
    firstId.current = first;
    height.current = el.scrollHeight;
    setViewing(channel.id, pinned.current && log.atEnd);
    // Nothing to scroll yet: fetch older pages until the pane fills.
    if (el.scrollHeight <= el.clientHeight && !log.reachedStart && !log.loading && log.items.length > 0) loadOlder(channel.id);
  });

  const onScroll = () => {
    const el = scroller.current;
    if (!el) return;
    pinned.current = el.scrollHeight - el.scrollTop - el.clientHeight < 40;
    height.current = el.scrollHeight;
    if (el.scrollTop < 400 && !log.reachedStart && !log.loading) loadOlder(channel.id);
    if (pinned.current && !log.atEnd && !log.loading) loadNewer(channel.id);
    setViewing(channel.id, pinned.current && log.atEnd);
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
        {log.reachedStart && log.items.length > 0 && (
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
        <ol class="messages" aria-label={`Messages in ${title}`}>
          {log.items.map((m) => (
            <MessageItem key={m.id} m={m} channel={channel} highlight={m.id === props.jumpTo} onReply={setReplyTo} />
          ))}
        </ol>
        {!log.loading && log.items.length === 0 && !log.error && <p class="empty">No messages yet. Say hello!</p>}
      </div>
      {!log.atEnd && (
        <button
          class="jump"
          onClick={() => {
            pinned.current = true;
            loadNewest(channel.id);
          }}
        >
          Jump to present
        </button>
      )}
      <Composer channel={channel} title={title} replyTo={replyTo} clearReply={() => setReplyTo(null)} />
    </section>
  );
}
