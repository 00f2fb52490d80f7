import { h } from "preact";
import { useRef, useState } from "preact/hooks";
import { send, typing } from "../client";
import { state } from "../state";
import type { Channel, Message } from "../types";
import { displayName, Perm } from "../types";
import { can } from "./perms";

interface Suggestion {
  key: string;
  label: string;
  insert: string; // text that replaces "@query"
}

function suggestions(channel: Channel, query: string): Suggestion[] {
  const q = query.toLowerCase();
  const out: Suggestion[] = [];
  const users = new Map<string, string>();
  if (channel.guild_id) {
    const g = state.guilds.get(channel.guild_id);
    for (const [id, m] of g?.members || []) {
      const u = state.users.get(id) || m.user;
      if (u) users.set(id, u.username);
    }
    for (const r of state.roles(channel.guild_id)) {
      if (r.id !== channel.guild_id && r.name.toLowerCase().startsWith(q))
        out.push({ key: "r" + r.id, label: "@" + r.name + " (role)", insert: "@" + r.name + " " });
    }
    if (can(channel.guild_id, Perm.MentionEveryone)) {
      for (const s of ["everyone", "here"]) if (s.startsWith(q)) out.push({ key: s, label: "@" + s, insert: "@" + s + " " });
    }
  } else {
    for (const u of channel.recipients || []) users.set(u.id, u.username);
  }
  const people: Suggestion[] = [];
  for (const [id, name] of users) {
    const u = state.users.get(id);
    const shown = displayName(u, state.member(channel.guild_id, id));
    if (name.toLowerCase().startsWith(q) || shown.toLowerCase().startsWith(q))
      people.push({ key: "u" + id, label: shown === name ? "@" + name : `${shown} (@${name})`, insert: "@" + name + " " });
  }
  people.sort((a, b) => a.label.localeCompare(b.label));
  return [...people, ...out].slice(0, 8);
}

// Composer is the message box: Enter sends, Shift+Enter breaks the line,
// "@" offers members, roles and @everyone (when allowed).
export function Composer(props: { channel: Channel; title: string; replyTo: Message | null; clearReply: () => void }) {
  const { channel } = props;
  const [text, setText] = useState("");
  const [query, setQuery] = useState<string | null>(null);
  const [sel, setSel] = useState(0);
  const box = useRef<HTMLTextAreaElement>(null);
  const list = query !== null ? suggestions(channel, query) : [];

  const updateQuery = (el: HTMLTextAreaElement) => {
    const before = el.value.slice(0, el.selectionStart ?? el.value.length);
    const m = /(?:^|\s)@([\w.\-]{0,32})$/.exec(before);
    setQuery(m ? m[1] : null);
    setSel(0);
  };

  const pick = (s: Suggestion) => {
    const el = box.current!;
    const caret = el.selectionStart ?? text.length;
    const before = text.slice(0, caret).replace(/@([\w.\-]{0,32})$/, s.insert);
    const next = before + text.slice(caret);
    setText(next);
    setQuery(null);
    requestAnimationFrame(() => {
      el.focus();
      el.selectionStart = el.selectionEnd = before.length;
    });
  };

  const submit = () => {
    const content = text.trim();
    if (!content) return;
    if (content.length > 2000) {
      state.toast(`A message can be at most 2000 characters; this one has ${content.length}.`);
      return;
    }
    if (!send(channel.id, content, props.replyTo?.id)) return;
    setText("");
    setQuery(null);
    props.clearReply();
  };

  const typers = state.typers(channel.id);
  const names = typers.map((id) => displayName(state.users.get(id), state.member(channel.guild_id, id)));
  let typingText = "";
  if (names.length === 1) typingText = `${names[0]} is typing…`;
  else if (names.length === 2) typingText = `${names[0]} and ${names[1]} are typing…`;
  else if (names.length === 3) typingText = `${names[0]}, ${names[1]} and ${names[2]} are typing…`;
  else if (names.length > 3) typingText = "Several people are typing…";

  return (
    <div class="composer">
      {props.replyTo && (
        <div class="replying">
          Replying to <strong>{displayName(props.replyTo.author)}</strong>{" "}
          <button class="small" onClick={props.clearReply} aria-label="Cancel reply">
            ✕
          </button>
        </div>
      )}
      {list.length > 0 && (
        <ul class="suggest" role="listbox" aria-label="Mention suggestions">
          {list.map((s, i) => (
            <li
              key={s.key}
              role="option"
              aria-selected={i === sel}
              class={i === sel ? "sel" : ""}
              onMouseDown={(e) => {
                e.preventDefault();
                pick(s);
              }}
            >
              {s.label}
            </li>
          ))}
        </ul>
      )}
      <textarea
        ref={box}
        rows={1}
        aria-label={`Message ${props.title}`}
        placeholder={`Message ${props.title}`}
        value={text}
        onInput={(e) => {
          const el = e.target as HTMLTextAreaElement;
          setText(el.value);
          updateQuery(el);
          if (el.value) typing(channel.id);
        }}
        onKeyDown={(e) => {
          if (list.length > 0) {
            if (e.key === "ArrowDown" || e.key === "ArrowUp") {
              e.preventDefault();
              setSel((sel + (e.key === "ArrowDown" ? 1 : list.length - 1)) % list.length);
              return;
            }
            if (e.key === "Tab" || (e.key === "Enter" && !e.shiftKey)) {
              e.preventDefault();
              pick(list[sel]);
              return;
            }
            if (e.key === "Escape") {
              setQuery(null);
              return;
            }
          }
          if (e.key === "Escape" && props.replyTo) props.clearReply();
          if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
            e.preventDefault();
            submit();
          }
        }}
      />
      <div class="typing" role="status" aria-live="polite">
        {typingText}
      </div>
    </div>
  );
}
