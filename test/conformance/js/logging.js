// An unmodified discord.js logging bot driven by the Go conformance test.
// When the owner posts "log <text>" it creates a channel webhook, lists
// the channel's webhooks, posts the text through the webhook with a
// username override, an embed and a file, edits and deletes that
// message, renames and deletes the webhook, and reads the webhook entries
// of the audit log back. It prints one JSON line per step. Env:
// CONCORD_API, CONCORD_TOKEN.
'use strict';
const { AuditLogEvent, Client, EmbedBuilder, Events, GatewayIntentBits } = require('discord.js');

const emit = (ev, fields) => process.stdout.write(JSON.stringify({ ev, ...fields }) + '\n');

const client = new Client({
  intents: [GatewayIntentBits.Guilds, GatewayIntentBits.GuildMessages, GatewayIntentBits.MessageContent,
    GatewayIntentBits.GuildWebhooks],
  rest: { api: process.env.CONCORD_API },
});

client.once(Events.ClientReady, (c) => emit('ready', { user: c.user.id }));
client.on(Events.WebhooksUpdate, (ch) => emit('webhooksUpdate', { channel: ch.id }));
client.on(Events.MessageCreate, async (m) => {
  if (m.webhookId) {
    emit('webhookMessageEvent', { id: m.id, webhook: m.webhookId, author: m.author.username, content: m.content });
    return;
  }
  const match = /^log (.+)$/.exec(m.content);
  if (m.author.id === client.user.id || !match) return;
  try {
    const hook = await m.channel.createWebhook({ name: 'Logger', reason: 'conformance logging' });
    emit('webhookCreated', { id: hook.id, token: Boolean(hook.token), channel: hook.channelId });
    const hooks = await m.channel.fetchWebhooks();
    emit('webhooksListed', { count: hooks.size, ids: [...hooks.keys()] });
    const sent = await hook.send({
      content: 'logged: ' + match[1], username: 'Audit Trail',
      embeds: [new EmbedBuilder().setTitle('Log entry').setDescription(match[1])],
      files: [{ attachment: Buffer.from('log line\n'), name: 'log.txt' }],
    });
    const att = sent.attachments.first();
    emit('webhookSent', { id: sent.id, webhook: sent.webhookId, author: sent.author.username, embeds: sent.embeds.length,
      attachments: sent.attachments.size, url: att && att.url, name: att && att.name });
    const edited = await hook.editMessage(sent.id, { content: 'edited: ' + match[1] });
    emit('webhookEdited', { id: edited.id, content: edited.content });
    await hook.deleteMessage(sent.id);
    emit('webhookMessageDeleted', { id: sent.id });
    // Seven at once: past the webhook's 5 per 2 s, so the library has to
    // follow the bucket headers (or the 429) to deliver them all.
    const burst = await Promise.all(Array.from({ length: 7 }, (_, i) => hook.send({ content: 'burst ' + i })));
    emit('webhookBurst', { count: burst.length, ids: [...new Set(burst.map((b) => b.id))] });
    const renamed = await hook.edit({ name: 'Logger 2' });
    emit('webhookRenamed', { name: renamed.name });
    await hook.delete('conformance cleanup');
    emit('webhookDeleted', { id: hook.id });
    const logs = await m.guild.fetchAuditLogs({ type: AuditLogEvent.WebhookCreate, limit: 5 });
    const entry = logs.entries.first();
    emit('audit', { count: logs.entries.size, target: entry && entry.targetId, executor: entry && entry.executorId });
  } catch (err) {
    emit('error', { message: String(err && err.stack || err) });
  }
});
client.on(Events.Error, (err) => emit('error', { message: String(err && err.stack || err) }));

process.on('unhandledRejection', (err) => emit('error', { message: String(err && err.stack || err) }));
process.stdin.on('end', () => { client.destroy(); process.exit(0); });
process.stdin.resume();

client.login(process.env.CONCORD_TOKEN).catch((err) => {
  emit('error', { message: 'login: ' + String(err && err.stack || err) });
  process.exit(1);
});
