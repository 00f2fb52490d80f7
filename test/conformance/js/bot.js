// An unmodified discord.js bot driven by the Go conformance test.
// It prints one JSON object per line for every event it sees, and it
// answers "ping" with a reply, then edits and deletes that reply.
// Env: CONCORD_API (REST base, e.g. http://127.0.0.1:8080/api), CONCORD_TOKEN.
'use strict';
const { Client, Events, GatewayIntentBits } = require('discord.js');

const emit = (ev, fields) => process.stdout.write(JSON.stringify({ ev, ...fields }) + '\n');

const client = new Client({
  intents: [GatewayIntentBits.Guilds, GatewayIntentBits.GuildMessages, GatewayIntentBits.MessageContent, GatewayIntentBits.DirectMessages],
  rest: { api: process.env.CONCORD_API },
});

client.once(Events.ClientReady, (c) => {
  emit('ready', { user: c.user.id, guilds: c.guilds.cache.map((g) => ({ id: g.id, channels: g.channels.cache.map((ch) => ch.id) })) });
});
client.on(Events.GuildCreate, (g) => emit('guildCreate', { id: g.id }));
client.on(Events.ShardResume, (id, replayed) => emit('resumed', { shard: id, replayed }));
client.on(Events.ShardDisconnect, (e, id) => emit('disconnect', { shard: id, code: e.code }));
client.on(Events.MessageCreate, async (m) => {
  emit('messageCreate', { id: m.id, channel: m.channelId, guild: m.guildId, content: m.content, author: m.author.id });
  if (m.author.id === client.user.id || m.content !== 'ping') return;
  try {
    const reply = await m.reply('pong');
    emit('replied', { id: reply.id, reference: reply.reference && reply.reference.messageId });
    const edited = await reply.edit('pong (edited)');
    emit('edited', { id: edited.id, content: edited.content, editedAt: edited.editedTimestamp });
    await edited.delete();
    emit('deleted', { id: edited.id });
  } catch (err) {
    emit('error', { message: String(err && err.stack || err) });
  }
});
client.on(Events.MessageUpdate, (_old, m) => emit('messageUpdate', { id: m.id, content: m.content }));
client.on(Events.MessageDelete, (m) => emit('messageDelete', { id: m.id }));
client.on(Events.Error, (err) => emit('error', { message: String(err && err.stack || err) }));

process.on('unhandledRejection', (err) => emit('error', { message: String(err && err.stack || err) }));
process.stdin.on('end', () => { client.destroy(); process.exit(0); });
process.stdin.resume();

client.login(process.env.CONCORD_TOKEN).catch((err) => {
  emit('error', { message: 'login: ' + String(err && err.stack || err) });
  process.exit(1);
});
