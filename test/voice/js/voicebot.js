// An unmodified @discordjs/voice 0.19 connection driven against Concord's
// SFU by the Go tests (test/voice/libs_integration_test.go).
//
// What is faked, and why: @discordjs/voice never talks to the chat gateway
// itself. It asks its "adapter" to send op 4 VOICE_STATE_UPDATE and waits
// for the adapter to hand it the VOICE_STATE_UPDATE and VOICE_SERVER_UPDATE
// dispatches. discord.js's own adapter does that over its gateway; Concord's
// chat gateway does not speak op 4 yet, so this adapter answers op 4 itself
// with the session id, endpoint and token the Go test minted — the exact
// dispatch shapes Discord sends. Everything after that (voice gateway, UDP,
// encryption, playing, receiving) is the library's own code.
//
// With CHAT_API set (Concord's REST base, e.g. http://127.0.0.1:8080/api)
// nothing is faked: an unmodified discord.js 14 client logs in with
// BOT_TOKEN over Concord's chat gateway and @discordjs/voice joins through
// discord.js's own adapter (guild.voiceAdapterCreator), so op 4 and both
// voice dispatches are Concord's.
//
// Environment: ENDPOINT, TOKEN, SESSION_ID, USER_ID, GUILD_ID, CHANNEL_ID,
// TONE (an Ogg Opus file to play, optional), LISTEN_TO (a user id whose
// Opus packets to record, optional), OUT (JSON results), DURATION_MS (how
// long to stay after playing), DROP_AFTER_MS (destroy the voice WebSocket
// once to force a resume, optional), WAIT_STDIN (wait for a line on stdin
// before playing). With CHAT_API, the result also has each received
// packet's arrival time (times, Unix ms) for the failover measurement.
'use strict';
const fs = require('node:fs');
const {
	joinVoiceChannel, createAudioPlayer, createAudioResource, StreamType, AudioPlayerStatus,
	VoiceConnectionStatus, entersState, EndBehaviorType,
} = require('@discordjs/voice');

const env = (k, d) => process.env[k] ?? d;
const out = { ready: false, received: [], played: false, resumed: false, debug: [], states: [], stateTimes: [] };
const finish = (code) => {
	fs.writeFileSync(env('OUT'), JSON.stringify(out));
	process.exit(code);
};
process.on('uncaughtException', (e) => { out.error = String(e && e.stack || e); finish(1); });

const adapterCreator = (methods) => ({
	sendPayload(payload) {
		if (payload.op !== 4) return false;
		setImmediate(() => {
			if (!payload.d.channel_id) return;
			methods.onVoiceStateUpdate({
				guild_id: payload.d.guild_id, channel_id: payload.d.channel_id, user_id: env('USER_ID'),
				session_id: env('SESSION_ID'), deaf: false, mute: false, self_deaf: payload.d.self_deaf,
				self_mute: payload.d.self_mute, suppress: false, request_to_speak_timestamp: null,
			});
			methods.onVoiceServerUpdate({ token: env('TOKEN'), guild_id: payload.d.guild_id, endpoint: env('ENDPOINT') });
		});
		return true;
	},
	destroy() {},
});

// chatAdapter logs discord.js in to Concord and returns the guild's own
// voice adapter.
async function chatAdapter() {
	const { Client, GatewayIntentBits, Events } = require('discord.js');
	const client = new Client({ intents: [GatewayIntentBits.Guilds, GatewayIntentBits.GuildVoiceStates], rest: { api: env('CHAT_API') } });
	const ready = new Promise((r) => client.once(Events.ClientReady, r));
	await client.login(env('BOT_TOKEN'));
	await ready;
	const guild = client.guilds.cache.get(env('GUILD_ID')) || await client.guilds.fetch(env('GUILD_ID'));
	out.chat = { user: client.user.id };
	return guild.voiceAdapterCreator;
}

async function main() {
	const creator = env('CHAT_API') ? await chatAdapter() : adapterCreator;
	const connection = joinVoiceChannel({
		channelId: env('CHANNEL_ID'), guildId: env('GUILD_ID'), adapterCreator: creator, selfDeaf: false, selfMute: false, debug: true,
	});
	connection.on('debug', (m) => { if (out.debug.length < 400) out.debug.push(m); });
	connection.on('stateChange', (o, n) => { out.states.push(`${o.status}->${n.status}`); out.stateTimes.push(Date.now()); });
	connection.on('error', (e) => { out.error = String(e); });
	await entersState(connection, VoiceConnectionStatus.Ready, 15000);
	out.ready = true;
	const networking = connection.state.networking;
	networking.on('stateChange', (o, n) => { if (o.code === 5 && n.code === 4) out.resumed = true; });

	if (env('LISTEN_TO')) {
		const stream = connection.receiver.subscribe(env('LISTEN_TO'), { end: { behavior: EndBehaviorType.Manual } });
		out.times = [];
		stream.on('data', (chunk) => {
			out.received.push(Buffer.from(chunk).toString('base64'));
			out.times.push(Date.now());
		});
	}
	if (env('DROP_AFTER_MS')) {
		setTimeout(() => {
			// Cut the voice WebSocket as a network failure would (code 1006).
			networking.state.ws.ws.terminate();
		}, Number(env('DROP_AFTER_MS')));
	}
	if (env('WAIT_STDIN')) {
		process.stdout.write('joined\n');
		// The test says "go" once everyone is in the call.
		await new Promise((r) => process.stdin.once('data', r));
	}
	if (env('TONE')) {
		const player = createAudioPlayer();
		connection.subscribe(player);
		player.play(createAudioResource(fs.createReadStream(env('TONE')), { inputType: StreamType.OggOpus }));
		await entersState(player, AudioPlayerStatus.Playing, 10000);
		await entersState(player, AudioPlayerStatus.Idle, 60000);
		out.played = true;
	}
	await new Promise((r) => setTimeout(r, Number(env('DURATION_MS', '1500'))));
	connection.destroy();
	finish(0);
}
main().catch((e) => { out.error = String(e && e.stack || e); finish(1); });
