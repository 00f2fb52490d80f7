// An unmodified discord.js moderation bot driven by the Go conformance
// test. When the owner posts "mod <user id>" it answers with an embed,
// reacts to the command, lists who reacted, pins the command, bans the
// user with a reason (deleting their last minute of messages), reads the
// ban and the audit log back, and lifts the ban. Given more ids ("mod
// <user> <kick> <senior> <owner>") it then kicks <kick> with a reason and
// reads that audit entry back, and tries to ban <senior> (ranked above the
// bot) and to kick the owner, which the server must refuse. It prints one
// JSON line per step. Env: CONCORD_API, CONCORD_TOKEN.
'use strict';
const { AuditLogEvent, Client, EmbedBuilder, Events, GatewayIntentBits } = require('discord.js');

const emit = (ev, fields) => process.stdout.write(JSON.stringify({ ev, ...fields }) + '\n');

const client = new Client({
  intents: [GatewayIntentBits.Guilds, GatewayIntentBits.GuildMessages, GatewayIntentBits.MessageContent,
    GatewayIntentBits.GuildMessageReactions, GatewayIntentBits.GuildModeration],
  rest: { api: process.env.CONCORD_API },
});

client.once(Events.ClientReady, (c) => emit('ready', { user: c.user.id }));
client.on(Events.MessageReactionAdd, (r, u) => emit('reactionAdd', { message: r.message.id, emoji: r.emoji.name, user: u.id }));
client.on(Events.ChannelPinsUpdate, (ch) => emit('pinsUpdate', { channel: ch.id }));
client.on(Events.GuildBanAdd, (ban) => emit('banAdd', { user: ban.user.id }));
client.on(Events.GuildBanRemove, (ban) => emit('banRemove', { user: ban.user.id }));
client.on(Events.MessageCreate, async (m) => {
  const match = /^mod (\d+)(?: (\d+) (\d+) (\d+))?$/.exec(m.content);
  if (m.author.id === client.user.id || !match) return;
  const target = match[1];
  try {
    const sent = await m.channel.send({ embeds: [new EmbedBuilder().setTitle('Moderation').setDescription('acting on ' + target)
      .setColor(0xff0000).addFields({ name: 'target', value: target, inline: true }).setFooter({ text: 'concord' })] });
    emit('embedSent', { id: sent.id, embeds: sent.embeds.length, title: sent.embeds[0] && sent.embeds[0].title,
      field: sent.embeds[0] && sent.embeds[0].fields[0] && sent.embeds[0].fields[0].value });
    await m.react('👍');
    const users = await m.reactions.resolve('👍').users.fetch();
    emit('reacted', { users: [...users.keys()] });
    await m.pin();
    const pinned = await m.channel.messages.fetchPinned();
    emit('pinned', { count: pinned.size !== undefined ? pinned.size : pinned.items.length });
    await m.guild.members.ban(target, { reason: 'conformance ban', deleteMessageSeconds: 60 });
    const ban = await m.guild.bans.fetch({ user: target, force: true });
    emit('banned', { user: ban.user.id, reason: ban.reason });
    const logs = await m.guild.fetchAuditLogs({ type: AuditLogEvent.MemberBanAdd, limit: 5 });
    const entry = logs.entries.first();
    emit('audit', { count: logs.entries.size, target: entry && entry.targetId, reason: entry && entry.reason, executor: entry && entry.executorId });
    await m.guild.members.unban(target);
    emit('unbanned', { user: target });
    if (!match[2]) return;
    const [kick, senior, owner] = match.slice(2);
    await m.guild.members.kick(kick, 'conformance kick');
    const kicks = await m.guild.fetchAuditLogs({ type: AuditLogEvent.MemberKick, limit: 5 });
    const k = kicks.entries.first();
    emit('kicked', { user: kick, target: k && k.targetId, reason: k && k.reason, executor: k && k.executorId });
    for (const [action, who] of [['ban', senior], ['kick', owner]]) {
      try {
        if (action === 'ban') await m.guild.members.ban(who, { reason: 'above me' });
        else await m.guild.members.kick(who, 'the owner');
        emit('error', { message: action + ' of ' + who + ' was allowed' });
      } catch (err) {
        emit('refused', { action, user: who, code: err.code, status: err.status });
      }
    }
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
