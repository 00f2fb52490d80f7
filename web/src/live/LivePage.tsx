import { Fragment, h } from "preact";
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import { savedToken } from "../client";
import { linkClick, navigate } from "../router";
import { createStream, type Item, LiveSession } from "./session";

function useSession(id: string): LiveSession {
  const [, bump] = useState(0);
  const ref = useRef<LiveSession | null>(null);
  if (!ref.current || ref.current.id !== id) {
    ref.current?.stop();
    let queued = false;
    ref.current = new LiveSession(id, savedToken(), () => {
      if (queued) return;
      queued = true;
      queueMicrotask(() => {
        queued = false;
        bump((n) => n + 1);
      });
    });
  }
  const s = ref.current;
  useEffect(() => {
    s.start();
    (window as any).concordLive = s;
    return () => s.stop();
  }, [s]);
  return s;
}

const hhmm = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit" });

function CommentRow(props: { it: Item; s: LiveSession; onError: (e: string) => void }) {
  const { it, s } = props;
  const c = it.c;
  const mine = !!s.me && c.author.id === s.me;
  const mod = s.isCreator;
  const [busy, setBusy] = useState(false);
  const act = async (fn: () => Promise<unknown>) => {
    setBusy(true);
    try {
      await fn();
    } catch (e) {
      props.onError((e as Error).message);
    } finally {
      setBusy(false);
    }
  };
  const name = mine && it.pending ? "You" : c.author.username;
  return (
    <li class={"lc" + (it.pending ? " pending" : "") + (it.error ? " failed" : "")} data-id={it.pending ? undefined : c.id}>
      <span class="author">{name}</span> <span class="text">{c.text}</span>
      {!it.pending && <time dateTime={c.created_at}>{hhmm.format(new Date(c.created_at))}</time>}
      {it.error && (
        <span class="send-error" role="alert">
          {it.error}{" "}
          <button class="small" onClick={() => s.post(c.text, c.video_ts_ms, it)}>
            Retry
          </button>{" "}
          <button class="small" onClick={() => s.discard(it)}>
            Discard
          </button>
        </span>
      )}
      {!it.pending && (mod || mine) && (
        <span class="lc-actions">
          <button class="small" disabled={busy} aria-label={`Retract "${c.text}" by ${c.author.username}`} onClick={() => act(() => s.retract(c.id))}>
            Retract
          </button>
          {mod && !mine && (
            <button
              class="small danger"
              disabled={busy}
              aria-label={`Ban ${c.author.username} for "${c.text}"`}
              onClick={() => act(() => s.ban(c.author.id, true))}
            >
              Ban
            </button>
          )}
        </span>
      )}
    </li>
  );
}

function Moderation(props: { s: LiveSession; onError: (e: string) => void }) {
  const { s } = props;
  const [slow, setSlow] = useState(String(s.stream?.slow_mode_seconds || 0));
  const [terms, setTerms] = useState((s.stream?.blocked_terms || []).join("\n"));
  const [src, setSrc] = useState(s.stream?.stream_url || "");
  const [saved, setSaved] = useState("");
  const save = async (e: Event) => {
    e.preventDefault();
    setSaved("");
    const n = Number(slow);
    if (!Number.isInteger(n) || n < 0) {
      props.onError("Slow mode is a whole number of seconds (0 turns it off).");
      return;
    }
    try {
      await s.settings(
        n,
        terms.split("\n").map((t) => t.trim()).filter(Boolean),
        src.trim(),
      );
      setSaved("Saved.");
    } catch (err) {
      props.onError((err as Error).message);
    }
  };
  return (
    <form class="moderation" aria-label="Moderation" onSubmit={save}>
      <h3>Moderation</h3>
      <label>
        <span>Slow mode (seconds)</span>
        <input type="number" min="0" max="21600" value={slow} onInput={(e) => setSlow((e.target as HTMLInputElement).value)} />
      </label>
      <label>
        <span>Blocked terms (one a line)</span>
        <textarea rows={3} value={terms} onInput={(e) => setTerms((e.target as HTMLTextAreaElement).value)} />
      </label>
      <label>
        <span>Video URL</span>
        <input type="url" value={src} placeholder="https://…" onInput={(e) => setSrc((e.target as HTMLInputElement).value)} />
      </label>
      <div class="row">
        <button class="primary" type="submit">
          Save Moderation
        </button>
        {s.stream?.state === "live" && (
          <button type="button" class="danger" onClick={() => s.end().catch((err) => props.onError(err.message))}>
            End Stream
          </button>
        )}
        <span class="hint" role="status">
          {saved}
        </span>
      </div>
    </form>
  );
}

function Bursts(props: { s: LiveSession }) {
  return (
    <div class="bursts" aria-hidden="true">
      {props.s.bursts.map((b) => (
        <span
          key={b.id}
          class={"burst" + (b.own ? " own" : "")}
          style={{ left: `${10 + b.x * 80}%` }}
          onAnimationEnd={() => props.s.burstDone(b.id)}
        >
          ♥
        </span>
      ))}
    </div>
  );
}

// LiveHome (/live) starts a stream: its page is the stream's link to share.
function LiveHome() {
  const token = savedToken();
  const [title, setTitle] = useState("");
  const [src, setSrc] = useState("");
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);
  const start = async (e: Event) => {
    e.preventDefault();
    setError("");
    if (!title.trim()) {
      setError("Give the stream a title.");
      return;
    }
    setBusy(true);
    try {
      const st = await createStream(token, title.trim(), src.trim());
      navigate(`/live/${st.id}`);
    } catch (err) {
      setError((err as Error).message);
      setBusy(false);
    }
  };
  return (
    <main class="login">
      <form class="card" aria-label="Go Live" onSubmit={start}>
        <h1>Go Live</h1>
        {!token ? (
          <p>
            <a href="/" onClick={linkClick}>
              Log in
            </a>{" "}
            to start a stream.
          </p>
        ) : (
          <Fragment>
            <label>
              <span>Stream title</span>
              <input value={title} maxLength={100} onInput={(e) => setTitle((e.target as HTMLInputElement).value)} />
            </label>
            <label>
              <span>Video URL (optional)</span>
              <input type="url" value={src} placeholder="https://…" onInput={(e) => setSrc((e.target as HTMLInputElement).value)} />
            </label>
            {error && (
              <p class="error" role="alert">
                {error}
              </p>
            )}
            <button class="primary" type="submit" disabled={busy}>
              Start Stream
            </button>
            <p class="hint">Viewers watch and comment at the stream's address; share it from your browser's address bar.</p>
          </Fragment>
        )}
        <a href="/" onClick={linkClick}>
          Back to Concord
        </a>
      </form>
    </main>
  );
}

export function LivePage(props: { parts: string[] }) {
  const id = props.parts[1] || "";
  if (!id) return <LiveHome />;
  return <LiveStream key={id} id={id} />;
}

function LiveStream(props: { id: string }) {
  const id = props.id;
  const s = useSession(id);
  const video = useRef<HTMLVideoElement>(null);
  const list = useRef<HTMLOListElement>(null);
  const stick = useRef(true);
  const [draft, setDraft] = useState("");
  const [notice, setNotice] = useState("");
  const [videoError, setVideoError] = useState("");

  // Keep the newest comment in view unless the viewer scrolled up.
  useLayoutEffect(() => {
    const el = list.current;
    if (el && stick.current) el.scrollTop = el.scrollHeight;
  });

  // Replay follows the playhead.
  useEffect(() => {
    const v = video.current;
    if (!v || s.transport !== "replay") return;
    let raf = 0;
    const tick = () => {
      s.onPlayhead(Math.round(v.currentTime * 1000));
      if (!v.paused) raf = requestAnimationFrame(tick);
    };
    const onTime = () => {
      cancelAnimationFrame(raf);
      tick();
    };
    v.addEventListener("timeupdate", onTime);
    v.addEventListener("seeked", onTime);
    v.addEventListener("play", onTime);
    onTime();
    return () => {
      cancelAnimationFrame(raf);
      v.removeEventListener("timeupdate", onTime);
      v.removeEventListener("seeked", onTime);
      v.removeEventListener("play", onTime);
    };
  }, [s, s.transport]);

  if (s.error && !s.stream) {
    return (
      <main class="login">
        <div class="card">
          <h1>Live</h1>
          <p class="error" role="alert">
            {s.error}
          </p>
          <a href="/" onClick={linkClick}>
            Back to Concord
          </a>
        </div>
      </main>
    );
  }
  const st = s.stream;
  const ended = st?.state === "ended";
  const send = async () => {
    const text = draft.trim();
    if (!text) return;
    if (text.length > 200) {
      setNotice("A comment is at most 200 characters.");
      return;
    }
    setDraft("");
    setNotice("");
    stick.current = true;
    try {
      await s.post(text, s.playheadMs(video.current));
    } catch (e) {
      setNotice((e as Error).message);
      setDraft(text);
    }
  };
  const status =
    s.transport === "live" ? "Live" : s.transport === "polling" ? "Reconnecting (polling)…" : s.transport === "replay" ? "Replay" : "Connecting…";
  return (
    <div class="live">
      <section class="live-main" aria-label="Stream">
        <header class="pane-head">
          <h2>{st?.title || "Live stream"}</h2>
          <span class={"live-state" + (ended ? " ended" : "")}>{ended ? "Ended" : "● Live"}</span>
          {!ended && (
            <span class="viewers" role="status" aria-label="Viewers">
              {s.viewers} watching
            </span>
          )}
          {!ended && st?.sampled && (
            <span
              class="sampled"
              role="status"
              aria-label="Top comments"
              title="So many comments are coming in that you see a selection: the creator's and moderators', the best of the rest, your friends' and your own."
            >
              Top comments
            </span>
          )}
        </header>
        <div class="video-wrap">
          <video
            ref={video}
            src={s.videoURL || undefined}
            controls
            autoplay
            muted
            playsInline
            aria-label="Stream video"
            onError={() => setVideoError("The video could not be played (unreachable, an unsupported format, or an origin this server does not allow).")}
            onLoadedData={() => setVideoError("")}
          />
          {!s.videoURL && <p class="no-video">No video for this stream.</p>}
          {videoError && (
            <p class="no-video" role="alert">
              {videoError}
            </p>
          )}
          <Bursts s={s} />
        </div>
        {s.isCreator && <Moderation s={s} onError={setNotice} />}
      </section>
      <aside class="live-side">
        <div class="live-status" role="status">
          {status}
        </div>
        <ol
          class="live-comments"
          aria-label="Live comments"
          ref={list}
          onScroll={(e) => {
            const el = e.currentTarget as HTMLElement;
            stick.current = el.scrollHeight - el.scrollTop - el.clientHeight < 40;
          }}
        >
          {s.items.map((it) => (
            <CommentRow key={it.key} it={it} s={s} onError={setNotice} />
          ))}
        </ol>
        {notice && (
          <p class="error" role="alert">
            {notice}
          </p>
        )}
        <form
          class="live-composer"
          onSubmit={(e) => {
            e.preventDefault();
            send();
          }}
        >
          <input
            aria-label="Comment"
            placeholder={!s.token ? "Log in to comment" : ended ? "Comments are closed" : "Say something…"}
            maxLength={200}
            disabled={!s.token || ended}
            value={draft}
            onInput={(e) => setDraft((e.target as HTMLInputElement).value)}
          />
          <button type="submit" class="primary" disabled={!s.token || ended}>
            Send
          </button>
          <button type="button" aria-label="Heart" disabled={!s.token || ended} onClick={() => s.tap()}>
            ♥
          </button>
        </form>
        {!s.token && (
          <p class="hint">
            <a href="/" onClick={linkClick}>
              Log in
            </a>{" "}
            to comment and react.
          </p>
        )}
      </aside>
    </div>
  );
}
