import { h } from "preact";
import type { ChannelViewProps } from "../seams";
import { state } from "../state";
import { displayName } from "../types";
import type { VoiceClient } from "./voice";

function userName(guildId: string | null, id: string): string {
  return displayName(state.users.get(id), state.member(guildId || undefined, id));
}

// VoiceChannelView is a voice channel's pane: who is in it (speaking
// people ringed), and the button to join.
export function voiceChannelView(v: VoiceClient) {
  return function VoiceChannelView(props: ChannelViewProps) {
    const { channel, guildId } = props;
    const here = v.channelId === channel.id && v.phase !== "idle";
    const people = guildId ? v.participants(guildId, channel.id) : [];
    return (
      <section class="pane voice-pane">
        <header class="pane-head">
          <h2>🔊 {state.channelName(channel)}</h2>
        </header>
        <div class="voice-body">
          <ul class="voice-people" aria-label={`In ${state.channelName(channel)}`}>
            {people.map(({ id, u }) => {
              const speaking = v.speaking.has(id);
              const name = userName(guildId, id);
              const flags = [speaking ? "speaking" : "", u.selfMute ? "muted" : "", u.selfDeaf ? "deafened" : ""].filter(Boolean);
              return (
                <li key={id} class={"voice-person" + (speaking ? " speaking" : "")} aria-label={name + (flags.length ? ` (${flags.join(", ")})` : "")}>
                  <span class="avatar" aria-hidden="true">
                    {name.slice(0, 1).toUpperCase()}
                  </span>
                  <span aria-hidden="true">{name}</span>
                  {u.selfMute && <span aria-hidden="true"> 🔇</span>}
                  {u.selfDeaf && <span aria-hidden="true"> 🎧</span>}
                </li>
              );
            })}
          </ul>
          {people.length === 0 && <p class="empty">No one is here yet.</p>}
          {!here && guildId && (
            <button class="primary" onClick={() => v.join(guildId, channel.id)}>
              Join Voice
            </button>
          )}
          {here && v.phase !== "connected" && <p role="status">Connecting to voice…</p>}
          {v.error && (
            <p class="error" role="alert">
              {v.error}
            </p>
          )}
        </div>
      </section>
    );
  };
}

// VoicePanel sits above the user bar while in a call.
export function voicePanel(v: VoiceClient) {
  return function VoicePanel() {
    if (v.phase === "idle") return null;
    const c = v.channelId ? state.channels.get(v.channelId) : undefined;
    const g = v.guildId ? state.guilds.get(v.guildId) : undefined;
    const where = `${c ? state.channelName(c) : "voice"}${g ? " / " + g.name : ""}`;
    const controls = (
      <div class="row">
        <button class="small" aria-pressed={v.muted} onClick={() => v.toggleMute()}>
          {v.muted ? "Unmute" : "Mute"}
        </button>
        <button class="small" aria-pressed={v.deafened} onClick={() => v.toggleDeafen()}>
          {v.deafened ? "Undeafen" : "Deafen"}
        </button>
        <button class="small danger" onClick={() => v.leave()}>
          Disconnect
        </button>
      </div>
    );
    if (v.phase !== "connected") {
      return (
        <div class="voice-panel connecting">
          <p role="status">{v.phase === "reconnecting" ? "Reconnecting voice…" : "Connecting to voice…"}</p>
          <span class="hint">{where}</span>
          {controls}
        </div>
      );
    }
    return (
      <section class="voice-panel" aria-label="Voice Connected">
        <strong class="voice-ok">Voice Connected</strong>
        <span class="hint">{where}</span>
        {controls}
      </section>
    );
  };
}
