// Voice in the client: a voice channel's pane ("Join Voice") and the
// "Voice Connected" panel, on one VoiceClient fed by gateway dispatches.
import { onDispatch, registerChannelView, registerPanel } from "../seams";
import { state } from "../state";
import { ChannelType } from "../types";
import { VoiceClient } from "./voice";
import { voiceChannelView, voicePanel } from "./VoiceView";

const voice = new VoiceClient(() => state.changed());
onDispatch((t, d) => voice.onDispatch(t, d));
registerChannelView(ChannelType.GuildVoice, voiceChannelView(voice));
registerPanel(voicePanel(voice));
// For the browser tests and debugging: RTP counters and the phase.
(window as any).concordVoice = voice;
