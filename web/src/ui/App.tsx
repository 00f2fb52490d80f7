import { Fragment, h } from "preact";
import { useEffect, useLayoutEffect, useState } from "preact/hooks";
import { acceptInvite, firstTextChannel, getInvite } from "../client";
import { navigate, onRoute, route } from "../router";
import { channelViews, routeViews } from "../seams";
import { dropStandIn, standInChannel } from "../standin";
import { state } from "../state";
import { ChannelType, isThread } from "../types";
import { Dialog } from "./Dialogs";
import { Login } from "./Login";
import { Members } from "./Members";
import { MessagePane } from "./Messages";
import { Servers } from "./Servers";
import { ServerSettings } from "./Settings";
import { DMSidebar, GuildSidebar } from "./Sidebar";

// useRender re-renders the component on every state change and route change.
function useRender() {
  const [, set] = useState(0);
  useEffect(() => {
    const bump = () => set((n) => n + 1);
    const a = state.subscribe(bump);
    const b = onRoute(bump);
    return () => {
      a();
      b();
    };
  }, []);
}

function Toasts() {
  return (
    <div class="toasts" role="log" aria-live="polite" aria-label="Notifications">
      {state.toasts.map((t) => (
        <div key={t.id} class="toast">
          <span>{t.text}</span>
          <button class="small" aria-label="Dismiss" onClick={() => state.dismiss(t.id)}>
            ✕
          </button>
        </div>
      ))}
    </div>
  );
}

function InvitePage(props: { code: string }) {
  const [inv, setInv] = useState<any>(null);
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    getInvite(props.code).then(setInv, (e) => setError((e as Error).message));
  }, [props.code]);
  return (
    <main class="login">
      <div class="card">
        <h1>{inv ? `You're invited to join ${inv.guild?.name}` : "Invite"}</h1>
        {inv && <p>Channel #{inv.channel?.name}</p>}
        {error && (
          <p class="error" role="alert">
            {error}
          </p>
        )}
        <div class="row">
          <button
            class="primary"
            disabled={!inv || busy}
            onClick={async () => {
              setBusy(true);
              try {
                const r = await acceptInvite(props.code);
                navigate(`/channels/${r.guild?.id || r.guild_id}${r.channel?.id ? "/" + r.channel.id : ""}`, true);
              } catch (e) {
                setError((e as Error).message);
                setBusy(false);
              }
            }}
          >
            Accept Invite
          </button>
          <button onClick={() => navigate("/channels/@me", true)}>Not now</button>
        </div>
      </div>
    </main>
  );
}

function Placeholder(props: { text: string }) {
  return (
    <section class="pane empty-pane">
      <p>{props.text}</p>
    </section>
  );
}

export function App() {
  useRender();
  const [dialog, setDialog] = useState<string | null>(null);
  const r = route();
  const [first, second, third, fourth] = r.parts;

  // The boot script's stand-in list (standin.ts) stays on screen, #app
  // hidden under it, only while this render has nothing better for its
  // channel: the channel's newest page is still on its way. Whatever this
  // render shows otherwise (the pane with its rows, an error, another
  // page) replaces it in the same commit.
  const standIn = standInChannel();
  const standInLog = standIn ? state.logs.get(standIn) : undefined;
  const holdStandIn =
    !!standInLog && first === "channels" && third === standIn && standInLog.loading && standInLog.items.length === 0 && !standInLog.error;
  useLayoutEffect(() => {
    if (standIn && !holdStandIn) dropStandIn();
  });

  const custom = routeViews.find((v) => v.prefix === first);
  if (custom && (custom.public || state.authed)) {
    const V = custom.view;
    return <V parts={r.parts} />;
  }
  if (!state.authed) {
    return (
      <Fragment>
        <Login />
        <Toasts />
      </Fragment>
    );
  }
  // Before READY only a channel URL whose channel was fetched early shows
  // (its messages, with the rest of the app filling in as the gateway
  // delivers it); everything else waits for the gateway.
  // Only a message pane: voice and other channel views act through the
  // gateway session, which READY starts.
  const earlyChannel = first === "channels" && third ? state.channels.get(third) : undefined;
  const early =
    !!earlyChannel &&
    !channelViews.has(earlyChannel.type) &&
    earlyChannel.type !== ChannelType.GuildVoice &&
    earlyChannel.type !== ChannelType.GuildCategory;
  if (!state.ready && !early) {
    return (
      <main class="login">
        <p role="status">Connecting to Concord…</p>
        <Toasts />
      </main>
    );
  }
  if (first === "invite" && second) return <InvitePage code={second} />;
  if (first !== "channels" || !second) {
    const g = state.guildOrder[0];
    queueMicrotask(() => navigate(g ? `/channels/${g}` : "/channels/@me", true));
    return null;
  }

  const isDM = second === "@me";
  const guildId = isDM ? null : second;
  const arriving = !!guildId && !state.guilds.has(guildId) && (!state.ready || state.pendingGuilds.has(guildId));
  if (guildId && !state.guilds.has(guildId) && !(arriving && early)) {
    return (
      <div class="app">
        <Servers guildId={guildId} onDialog={setDialog} />
        <Placeholder
          text={
            arriving
              ? "Loading the server…"
              : state.joining.has(guildId)
              ? "Joining the server…"
              : "This server is not available: you may have left it, or it was deleted."
          }
        />
        {dialog && <Dialog kind={dialog} guildId={null} channelId={null} onClose={() => setDialog(null)} />}
        <Toasts />
      </div>
    );
  }
  let channelId: string | null = third || null;
  if (guildId && !channelId) {
    const c = firstTextChannel(guildId);
    if (c) queueMicrotask(() => navigate(`/channels/${guildId}/${c.id}`, true));
  }
  const channel = channelId ? state.channels.get(channelId) : undefined;
  if (channelId && !channel) channelId = null;

  let pane;
  if (!channel) {
    pane = <Placeholder text={isDM ? "Pick a conversation, or open one from a member list." : "Pick a channel."} />;
  } else if (channel.type === ChannelType.GuildCategory) {
    pane = <Placeholder text="Categories hold channels; pick one of its channels." />;
  } else if (channelViews.has(channel.type)) {
    const V = channelViews.get(channel.type)!;
    pane = <V channel={channel} guildId={guildId} />;
  } else if (channel.type === ChannelType.GuildVoice) {
    pane = <Placeholder text="Voice channels are not available in this build yet." />;
  } else {
    pane = <MessagePane key={channel.id} channel={channel} jumpTo={fourth || null} />;
  }

  return (
    <div class="app">
      <Servers guildId={guildId} onDialog={setDialog} />
      {guildId ? (
        <GuildSidebar guildId={guildId} channelId={channelId} onDialog={setDialog} />
      ) : (
        <DMSidebar channelId={channelId} onDialog={setDialog} />
      )}
      {pane}
      {channel && channel.type !== ChannelType.GuildCategory && !arriving && (
        // A thread shows its parent's members, as Discord's client does.
        <Members channel={(isThread(channel) && channel.parent_id && state.channels.get(channel.parent_id)) || channel} />
      )}
      {state.conn !== "connected" && (
        <div class="banner" role="status">
          {state.conn === "reconnecting" ? "Connection lost: reconnecting…" : state.conn === "offline" ? "Offline." : "Connecting…"}
        </div>
      )}
      {dialog === "settings" && guildId && <ServerSettings guildId={guildId} onClose={() => setDialog(null)} />}
      {dialog && dialog !== "settings" && (
        <Dialog kind={dialog} guildId={guildId} channelId={channelId} onClose={() => setDialog(null)} />
      )}
      <Toasts />
    </div>
  );
}
