import { h } from "preact";
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import {
  addThreadMember,
  createThread,
  deleteMessage,
  joinThread,
  discardSend,
  loadArchivedThreads,
  startThread,
  editMessage,
  loadAround,
  loadNewer,
  loadNewest,
  loadOlder,
  react,
  retrySend,
  setThreadArchived,
  setViewing,
} from "../client";
import { linkClick, navigate } from "../router";
import { state } from "../state";
import type { Channel, Message } from "../types";
import { ChannelType, displayName, hasThreads, isThread, MessageType, Perm } from "../types";
import { Composer } from "./Composer";
import { Content } from "./Content";
import { messageTime } from "../format";
import { standInChannel, standInHeights } from "../standin";
import { can } from "./perms";
import { ChannelPermissions } from "./Settings";


export function channelTitle(c: Channel): string {
  return (c.guild_id ? "#" : "@") + state.channelName(c);
}

// QUICK_REACTIONS are the emoji the reaction picker offers.
const QUICK_REACTIONS = ["👍", "❤️", "😂", "🎉", "😮", "😢"];

// Body is a message's text, or a system message's sentence: a thread
// started in the channel, or the message a thread was started from.
function Body(props: { m: Message; author: string }) {
  const { m } = props;
  if (m.type === MessageType.ThreadCreated) {
    const id = m.message_reference?.channel_id;
    const t = id ? state.channels.get(id) : undefined;
    return (
      <span class="system">
        {props.author} started a thread: {t?.guild_id ? <a href={`/channels/${t.guild_id}/${t.id}`} onClick={linkClick}>{m.content}</a> : m.content}
      </span>
    );
  }
  if (m.type === MessageType.ThreadStarter) {
    const ref = m.referenced_message;
    if (!ref) return <span class="system">The message this thread was started from was deleted.</span>;
    return (
      <span class="starter">
        <span class="author">{displayName(ref.author)}</span>: <Content m={ref} />
      </span>
    );
  }
  return <Content m={m} />;
}

function MessageItem(props: {
  m: Message;
  channel: Channel;
  // pos and size: the row's place among all the channel's messages, for
  // assistive technology (the DOM holds only the rows near the view);
  // pos 0 when older messages are not loaded yet, size -1 when unknown.
  pos: number;
  size: number;
  highlight: boolean;
  onReply: (m: Message) => void;
}) {
  const { m, channel } = props;
  const [editing, setEditing] = useState(false);
  const [draft, setDraft] = useState(m.content);
  const [confirming, setConfirming] = useState(false);
  const [picking, setPicking] = useState(false);
  const [naming, setNaming] = useState(false);
  const [threadName, setThreadName] = useState("");
  const [threadError, setThreadError] = useState("");
  const mine = m.author.id === state.me?.id;
  const real = !m.id.startsWith("pending-");
  const canDelete = mine || can(channel.guild_id, Perm.ManageMessages);
  const author = displayName(m.author, m.member || state.member(channel.guild_id, m.author.id));
  const ref = m.referenced_message;
  const nonce = m.nonce !== undefined ? String(m.nonce) : "";
  // The thread this message started: its id is the message's.
  const known = state.channels.get(m.id);
  const thread = isThread(known) ? known : m.thread;
  const canThread = real && hasThreads(channel) && !thread && m.type !== MessageType.ThreadCreated;
  const startThread = async () => {
    const name = threadName.trim();
    if (!name) return;
    try {
      const t = await createThread(channel.id, m.id, name);
      setNaming(false);
      navigate(`/channels/${channel.guild_id}/${t.id}`);
    } catch (e) {
      setThreadError((e as Error).message);
    }
  };
  return (
    <li
      class={"msg" + (m.pending ? " pending" : "") + (m.failed ? " failed" : "") + (props.highlight ? " highlight" : "")}
      id={real ? `msg-${m.id}` : undefined}
      data-id={m.id}
      aria-posinset={props.pos || undefined}
      aria-setsize={props.pos ? props.size : undefined}
    >
      {ref && m.type !== MessageType.ThreadStarter && (
        <div class="reply-ref">
          ↪ <span class="author">{displayName(ref.author)}</span> <span class="snippet">{ref.content.slice(0, 80)}</span>
        </div>
      )}
      {m.message_reference && !ref && m.type === 19 && <div class="reply-ref">↪ original message was deleted</div>}
      <div class="meta">
        <span class="author">{author}</span>
        <time dateTime={m.timestamp}>{messageTime(m.timestamp)}</time>
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
        // elementtiming: the browser reports when a message's text was
        // first painted (the first-paint benchmark reads it).
        <div class="content" elementtiming="message">
          <Body m={m} author={author} />
          {m.edited_timestamp && <span class="edited"> (edited)</span>}
        </div>
      )}
      {thread && (
        <a
          class="thread-chip"
          href={`/channels/${channel.guild_id}/${thread.id}`}
          onClick={linkClick}
          aria-label={`Open thread ${thread.name}`}
        >
          🧵 <span>{thread.name}</span>
          {thread.message_count ? <span class="count">{thread.message_count} messages</span> : null}
        </a>
      )}
      {naming && (
        <form
          class="thread-form"
          onSubmit={(e) => {
            e.preventDefault();
            startThread();
          }}
        >
          <input
            aria-label="Thread Name"
            value={threadName}
            maxLength={100}
            ref={(el) => el?.focus()}
            onInput={(e) => setThreadName((e.target as HTMLInputElement).value)}
            onKeyDown={(e) => e.key === "Escape" && setNaming(false)}
          />
          <button class="small primary" type="submit" disabled={!threadName.trim()}>
            Start Thread
          </button>
          <button class="small" type="button" onClick={() => setNaming(false)}>
            Cancel
          </button>
          {threadError && (
            <span class="error" role="alert">
              {threadError}
            </span>
          )}
        </form>
      )}
      {real && m.reactions && m.reactions.length > 0 && (
        <div class="reactions">
          {m.reactions.map((r) => (
            <button
              key={r.emoji.id || r.emoji.name}
              class={"reaction" + (r.me ? " me" : "")}
              aria-pressed={r.me}
              aria-label={`${r.emoji.name}, ${r.count} ${r.count === 1 ? "reaction" : "reactions"}`}
              onClick={() => react(channel.id, m.id, r.emoji, r.me)}
            >
              {r.emoji.name} {r.count}
            </button>
          ))}
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
          <button class="small" onClick={() => setPicking(!picking)} aria-expanded={picking}>
            Add Reaction
          </button>
          {picking &&
            QUICK_REACTIONS.map((e) => (
              <button
                key={e}
                class="small"
                aria-label={`React with ${e}`}
                onClick={() => {
                  setPicking(false);
                  const mine = m.reactions?.find((r) => !r.emoji.id && r.emoji.name === e)?.me;
                  if (!mine) react(channel.id, m.id, { id: null, name: e }, false);
                }}
              >
                {e}
              </button>
            ))}
          <button class="small" onClick={() => props.onReply(m)} aria-label={`Reply to ${author}`}>
            Reply
          </button>
          {canThread && (
            <button
              class="small"
              aria-expanded={naming}
              onClick={() => {
                setThreadError("");
                setThreadName(m.content.replace(/\s+/g, " ").trim().slice(0, 40) || "New thread");
                setNaming(!naming);
              }}
            >
              Create Thread
            </button>
          )}
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

// The message list is virtualised: of the loaded history (a tab that
// scrolled back through 10,000 messages holds them all in state) only
// the rows within OVERSCAN pixels of the viewport are in the DOM. The
// rest are two paddings of the list whose heights are the sum of their
// rows' heights: measured once a row was rendered (cached by message id,
// kept current by a ResizeObserver), estimated from the measured mean
// before. Whatever changes above the view (an older page, a row growing,
// the estimate giving way to measurements), the first message in view
// stays where it was on screen: an anchor (its id and offset from the
// top of the viewport) restored after each render.
const OVERSCAN = 800;
const FIRST_ESTIMATE = 48;

// virtualised can be switched off for a tab (localStorage
// "concord.virtualList" = "off", read at start): the benchmark's peer,
// the same client rendering every loaded message.
const virtualised = (() => {
  try {
    return localStorage.getItem("concord.virtualList") !== "off";
  } catch {
    return true;
  }
})();

let firstRows = false;

// overscan is OVERSCAN once the app's first rows were painted; until then
// only the rows in the viewport are rendered (and measured), so the first
// frame waits for as few rows as can fill it. localStorage
// "concord.firstPass" = "full" renders the overscan from the start: the
// first-paint benchmark's peer.
let overscan = (() => {
  try {
    return localStorage.getItem("concord.firstPass") === "full" ? OVERSCAN : 0;
  } catch {
    return 0;
  }
})();

// rowHeights caches measured row heights by message id, with their mean
// as the estimate of rows not measured yet.
class RowHeights {
  private h = new Map<string, number>();
  private sum = 0;

  get(id: string): number | undefined {
    return this.h.get(id);
  }

  estimate(): number {
    return this.h.size ? this.sum / this.h.size : FIRST_ESTIMATE;
  }

  // set records a measurement and reports whether it changed anything.
  set(id: string, v: number): boolean {
    const old = this.h.get(id);
    if (old !== undefined && Math.abs(old - v) < 0.5) return false;
    this.sum += v - (old ?? 0);
    this.h.set(id, v);
    return true;
  }
}

// offsets returns the top of every row relative to the list's content
// (n+1 entries; the last is the total height).
function offsets(items: Message[], heights: RowHeights): Float64Array {
  const est = heights.estimate();
  const tops = new Float64Array(items.length + 1);
  for (let i = 0; i < items.length; i++) tops[i + 1] = tops[i] + (heights.get(items[i].id) ?? est);
  return tops;
}

// rowAt is the index of the row containing y (clamped to the rows).
function rowAt(tops: Float64Array, y: number): number {
  let lo = 0;
  let hi = tops.length - 2;
  if (hi < 0) return 0;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (tops[mid] <= y) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

// MessagePane is a channel's history and composer. It opens on the newest
// page (or around a linked message), loads older pages as the list
// scrolls up, and keeps the view pinned to the bottom while it is there.
export function MessagePane(props: { channel: Channel; jumpTo: string | null }) {
  const { channel } = props;
  const log = state.log(channel.id);
  const scroller = useRef<HTMLDivElement>(null);
  const list = useRef<HTMLOListElement>(null);
  const pinned = useRef(true);
  const jumped = useRef(false);
  const [heights] = useState(() => {
    const h = new RowHeights();
    // Rows the boot script's stand-in list laid out for this channel are
    // placed by their measured heights from the first pass (the stand-in
    // has the pane's layout), which then needs no second one.
    if (standInChannel() === channel.id) for (const [id, v] of standInHeights()) h.set(id, v);
    return h;
  });
  const anchor = useRef<{ id: string; offset: number } | null>(null);
  // The rendered rows [start, end) and the offsets they were placed by.
  const view = useRef<{ start: number; end: number; tops: Float64Array }>({ start: 0, end: 0, tops: new Float64Array(1) });
  const listTop = useRef(0); // the list's offsetTop in the scroller
  const settle = useRef(0); // renders asked for by layout in a row
  const [, rerender] = useState(0);
  const [replyTo, setReplyTo] = useState<Message | null>(null);
  const [editPerms, setEditPerms] = useState(false);
  const [showThreads, setShowThreads] = useState(false);
  const [addMember, setAddMember] = useState(false);

  useEffect(() => {
    pinned.current = !props.jumpTo;
    jumped.current = false;
    anchor.current = null;
    setReplyTo(null);
    if (props.jumpTo) loadAround(channel.id, props.jumpTo);
    else if (!log.loading && (!log.atEnd || log.items.length === 0 || log.error)) loadNewest(channel.id);
    return () => setViewing(null, false);
  }, [channel.id, props.jumpTo]);

  const items = log.items;
  const n = items.length;
  const tops = offsets(items, heights);
  const indexOf = (id: string) => {
    for (let i = n - 1; i >= 0; i--) if (items[i].id === id) return i;
    return -1;
  };

  // Where the viewport will be once layout placed it, relative to the
  // list's content: at the bottom when pinned, centred on a linked
  // message, by the anchor, or wherever the user scrolled.
  const el = scroller.current;
  const vh = el ? el.clientHeight : 800;
  let viewTop = el ? el.scrollTop - listTop.current : 0;
  let must = -1; // a row that must be rendered whatever the estimate says
  const target = props.jumpTo && !jumped.current ? indexOf(props.jumpTo) : -1;
  if (pinned.current) {
    viewTop = tops[n] - vh;
  } else if (target >= 0) {
    must = target;
    viewTop = (tops[target] + tops[target + 1]) / 2 - vh / 2;
  } else if (anchor.current) {
    const a = indexOf(anchor.current.id);
    if (a >= 0) {
      must = a;
      viewTop = tops[a] - anchor.current.offset;
    }
  }
  let start = 0;
  let end = n;
  if (virtualised && n > 0) {
    start = rowAt(tops, viewTop - overscan);
    end = rowAt(tops, viewTop + vh + overscan) + 1;
    if (must >= 0) {
      start = Math.min(start, must);
      end = Math.max(end, must + 1);
    }
  }
  view.current = { start, end, tops };
  const shown = items.slice(start, end);
  const atPresent = end === n && log.atEnd;
  const complete = log.reachedStart;

  // saveAnchor remembers the first (confirmed) message in view.
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
  };

  // measure records the rendered rows' heights; true when one changed.
  const measure = () => {
    const ol = list.current;
    if (!ol) return false;
    let changed = false;
    for (const li of Array.from(ol.children) as HTMLElement[]) {
      const id = li.dataset.id;
      if (id && heights.set(id, li.getBoundingClientRect().height)) changed = true;
    }
    return changed;
  };

  // covered: the rendered rows reach past both edges of the viewport by
  // half the overscan (or to the ends of the loaded history).
  const covered = () => {
    const el = scroller.current;
    if (!el || !virtualised) return true;
    const { start, end, tops } = view.current;
    const top = el.scrollTop - listTop.current;
    const m = tops.length - 1;
    return (start === 0 || tops[start] <= top - overscan / 2) && (end === m || tops[end] >= top + el.clientHeight + overscan / 2);
  };

  // place puts the viewport where it belongs after a render or a resize.
  const place = () => {
    const el = scroller.current;
    const ol = list.current;
    if (!el || !ol) return;
    listTop.current = ol.offsetTop;
    if (pinned.current) {
      el.scrollTop = el.scrollHeight;
    } else if (props.jumpTo && !jumped.current) {
      const li = document.getElementById(`msg-${props.jumpTo}`);
      if (li) {
        jumped.current = true;
        el.scrollTop = li.offsetTop + li.offsetHeight / 2 - el.clientHeight / 2;
      }
    } else if (anchor.current) {
      const a = ol.querySelector(`[data-id="${anchor.current.id}"]`) as HTMLElement | null;
      if (a) el.scrollTop = a.offsetTop - anchor.current.offset;
    }
    saveAnchor();
  };

  const nearEdges = () => {
    const el = scroller.current;
    if (!el) return;
    const reach = Math.max(400, el.clientHeight);
    const top = el.scrollTop - listTop.current;
    const bottom = el.scrollHeight - el.scrollTop - el.clientHeight;
    if (log.loading || n === 0) return;
    if (top < reach && !log.reachedStart) loadOlder(channel.id);
    else if (bottom < reach && view.current.end === n && !log.atEnd) loadNewer(channel.id);
  };

  useLayoutEffect(() => {
    const el = scroller.current;
    if (!el) return;
    if (n > 0 && !firstRows) {
      firstRows = true;
      performance.mark("concord:messages"); // the first rows are in the DOM
      if (overscan === 0) {
        // After the frame that shows them (an animation frame runs just
        // before it, a task just after), render the overscan too.
        requestAnimationFrame(() =>
          setTimeout(() => {
            overscan = OVERSCAN;
            rerender((x) => x + 1);
          }, 0),
        );
      }
    }
    const changed = measure();
    place();
    setViewing(channel.id, pinned.current && atPresent);
    // A measurement that moved rows, or rows short of the viewport: render
    // again (bounded: each pass measures more rows, and estimates stop
    // changing once everything near the view is measured).
    if ((changed || !covered()) && settle.current < 8) {
      settle.current++;
      rerender((x) => x + 1);
      return;
    }
    settle.current = 0;
    nearEdges();
  });

  // Rows change height without the pane rendering (an edit box opens, a
  // confirmation shows) and the viewport changes with the window or the
  // composer: measure again and keep the anchor.
  useEffect(() => {
    const ol = list.current;
    const el = scroller.current;
    if (!ol || !el || typeof ResizeObserver === "undefined") return;
    const ro = new ResizeObserver(() => {
      if (measure() || !covered()) rerender((x) => x + 1);
      else if (pinned.current) el.scrollTop = el.scrollHeight;
    });
    ro.observe(ol);
    ro.observe(el);
    return () => ro.disconnect();
  }, []);

  const onScroll = () => {
    const el = scroller.current;
    if (!el) return;
    const fromBottom = el.scrollHeight - el.scrollTop - el.clientHeight;
    pinned.current = fromBottom < 40 && view.current.end === log.items.length && log.atEnd;
    saveAnchor();
    if (!covered()) rerender((x) => x + 1);
    nearEdges();
    setViewing(channel.id, pinned.current && log.atEnd && view.current.end === log.items.length);
  };

  const title = channelTitle(channel);
  const thread = isThread(channel);
  const parent = thread && channel.parent_id ? state.channels.get(channel.parent_id) : undefined;
  const archived = !!channel.thread_metadata?.archived;
  const manageThread = thread && (channel.owner_id === state.me?.id || can(channel.guild_id, Perm.ManageThreads));
  return (
    <section class="pane" aria-label={title}>
      <header class="pane-head">
        {parent && (
          <a class="crumb" href={`/channels/${channel.guild_id}/${parent.id}`} onClick={linkClick}>
            {channelTitle(parent)} ›
          </a>
        )}
        <h2>{title}</h2>
        {archived && <span class="topic">This thread is closed; sending a message reopens it.</span>}
        {channel.topic && <span class="topic">{channel.topic}</span>}
        {thread && !channel.member && (
          // Joined, the thread's membership comes back in
          // THREAD_MEMBERS_UPDATE, which hides the button.
          <button class="small push" onClick={() => joinThread(channel.id)}>
            Join Thread
          </button>
        )}
        {channel.type === ChannelType.PrivateThread && !archived && (manageThread || channel.member) && (
          <button class="small push" aria-expanded={addMember} onClick={() => setAddMember(!addMember)}>
            Add Member
          </button>
        )}
        {manageThread && (
          <button class="small push" onClick={() => setThreadArchived(channel.id, !archived)}>
            {archived ? "Reopen Thread" : "Close Thread"}
          </button>
        )}
        {hasThreads(channel) && (
          <button class="small push" aria-expanded={showThreads} onClick={() => setShowThreads(!showThreads)}>
            Threads
          </button>
        )}
        {channel.guild_id && can(channel.guild_id, Perm.ManageRoles) && (
          <button class="small push" onClick={() => setEditPerms(true)}>
            Channel Permissions
          </button>
        )}
      </header>
      {editPerms && <ChannelPermissions channel={channel} onClose={() => setEditPerms(false)} />}
      {showThreads && <ThreadList channel={channel} />}
      {addMember && <AddThreadMember thread={channel} onClose={() => setAddMember(false)} />}
      <div class="scroller" ref={scroller} onScroll={onScroll}>
        {complete && items.length > 0 && (
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
        <ol
          class="messages"
          aria-label={`Messages in ${title}`}
          ref={list}
          style={{ paddingTop: `${tops[start]}px`, paddingBottom: `${tops[n] - tops[end]}px` }}
        >
          {shown.map((m, i) => (
            <MessageItem
              key={m.id}
              m={m}
              channel={channel}
              pos={complete ? start + i + 1 : 0}
              size={complete && log.atEnd ? n : -1}
              highlight={m.id === props.jumpTo}
              onReply={setReplyTo}
            />
          ))}
        </ol>
        {!log.loading && log.items.length === 0 && !log.error && <p class="empty">No messages yet. Say hello!</p>}
      </div>
      {!atPresent && (
        <button
          class="jump"
          onClick={() => {
            pinned.current = true;
            if (log.atEnd) rerender((x) => x + 1);
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

// ThreadList is a channel's threads, opened from the pane's "Threads"
// button: the active ones (known from GUILD_CREATE and the gateway), a
// form to start one (public, or private when the user may), and the
// archived ones, read a page at a time when asked for.
function ThreadList(props: { channel: Channel }) {
  const threads = state.threadsOf(props.channel.id);
  const title = channelTitle(props.channel);
  const g = props.channel.guild_id;
  const [name, setName] = useState("");
  const [priv, setPriv] = useState(false);
  const [archived, setArchived] = useState<{ threads: Channel[]; hasMore: boolean; loading: boolean } | null>(null);
  const mayPrivate = can(g, Perm.CreatePrivateThreads);
  const start = async (e: Event) => {
    e.preventDefault();
    const n = name.trim();
    if (!n) return;
    try {
      const t = await startThread(props.channel.id, n, priv && mayPrivate);
      setName("");
      navigate(`/channels/${t.guild_id || g}/${t.id}`);
    } catch (err) {
      state.toast("Could not start the thread: " + (err as Error).message);
    }
  };
  const more = async () => {
    const have = archived?.threads || [];
    const last = have[have.length - 1]?.thread_metadata?.archive_timestamp;
    setArchived({ threads: have, hasMore: archived?.hasMore ?? false, loading: true });
    try {
      const page = await loadArchivedThreads(props.channel.id, archived ? last : undefined, can(g, Perm.ManageThreads));
      const ids = new Set(have.map((t) => t.id));
      setArchived({ threads: [...have, ...page.threads.filter((t) => !ids.has(t.id))], hasMore: page.hasMore, loading: false });
    } catch (err) {
      setArchived({ threads: have, hasMore: false, loading: false });
      state.toast("Could not load the archived threads: " + (err as Error).message);
    }
  };
  const entry = (t: Channel) => (
    <li key={t.id}>
      <a href={`/channels/${t.guild_id || g}/${t.id}`} onClick={linkClick}>
        {t.type === ChannelType.PrivateThread ? "🔒" : "🧵"} {t.name}
      </a>{" "}
      <span class="topic">
        {t.message_count || 0} messages · {t.member_count || 0} members
      </span>
    </li>
  );
  return (
    <div class="thread-list">
      {threads.length === 0 ? (
        <p class="empty">No active threads in {title}.</p>
      ) : (
        <ul aria-label={`Active threads in ${title}`}>{threads.map(entry)}</ul>
      )}
      <form class="thread-new" onSubmit={start}>
        <input aria-label="New thread name" placeholder="New thread" maxLength={100} value={name} onInput={(e) => setName((e.target as HTMLInputElement).value)} />
        {mayPrivate && (
          <label>
            <input type="checkbox" checked={priv} onChange={(e) => setPriv((e.target as HTMLInputElement).checked)} /> Private thread
          </label>
        )}
        <button class="small" type="submit" disabled={!name.trim()}>
          New Thread
        </button>
      </form>
      {archived === null ? (
        <button class="small" onClick={more}>
          Archived Threads
        </button>
      ) : (
        <div>
          {archived.threads.length === 0 && !archived.loading ? (
            <p class="empty">No archived threads in {title}.</p>
          ) : (
            <ul aria-label={`Archived threads in ${title}`}>{archived.threads.map(entry)}</ul>
          )}
          {archived.hasMore && (
            <button class="small" disabled={archived.loading} onClick={more}>
              Older Threads
            </button>
          )}
        </div>
      )}
    </div>
  );
}

// AddThreadMember adds a member of the guild to a private thread: the
// thread's owner, or anyone who may manage threads.
function AddThreadMember(props: { thread: Channel; onClose: () => void }) {
  const g = props.thread.guild_id ? state.guilds.get(props.thread.guild_id) : undefined;
  const [who, setWho] = useState("");
  const me = state.me?.id;
  const options = g ? [...g.members.values()].filter((m) => m.user && m.user.id !== me) : [];
  const add = async (e: Event) => {
    e.preventDefault();
    if (!who) return;
    try {
      await addThreadMember(props.thread.id, who);
      props.onClose();
    } catch (err) {
      state.toast("Could not add them to the thread: " + (err as Error).message);
    }
  };
  return (
    <form class="thread-add" onSubmit={add}>
      <select aria-label="Member" value={who} onChange={(e) => setWho((e.target as HTMLSelectElement).value)}>
        <option value="">Choose a member…</option>
        {options.map((m) => (
          <option key={m.user!.id} value={m.user!.id}>
            {displayName(m.user!, m)}
          </option>
        ))}
      </select>
      <button class="small" type="submit" disabled={!who}>
        Add
      </button>
      <button class="small" type="button" onClick={props.onClose}>
        Cancel
      </button>
    </form>
  );
}
