// An unmodified discord.js ticket bot driven by the Go conformance test.
// When a member posts "ticket" it opens a private thread for them (not
// invitable), adds them, writes in it, starts a public thread from their
// message, lists the guild's active threads, archives the ticket and
// lists the channel's archived private threads. It prints one JSON line
// per step. Env: CONCORD_API, CONCORD_TOKEN.
'use strict';
const { ChannelType, Client, Events, GatewayIntentBits, ThreadAutoArchiveDuration } = require('discord.js');

const emit = (ev, fields) => process.stdout.write(JSON.stringify({ ev, ...fields }) + '\n');

const client = new Client({
  intents: [GatewayIntentBits.Guilds, GatewayIntentBits.GuildMessages, GatewayIntentBits.MessageContent,
    GatewayIntentBits.GuildMembers],
  rest: { api: process.env.CONCORD_API },
});

client.once(Events.ClientReady, (c) => emit('ready', { user: c.user.id }));
client.on(Events.ThreadCreate, (th, created) => emit('threadCreateEvent', { id: th.id, type: th.type, created }));
client.on(Events.ThreadUpdate, (_, th) => emit('threadUpdateEvent', { id: th.id, archived: th.archived }));
client.on(Events.ThreadMembersUpdate, (added, _removed, th) => emit('threadMembersEvent', { id: th.id, added: [...added.keys()] }));
client.on(Events.MessageCreate, async (m) => {
  if (m.author.id === client.user.id || m.content !== 'ticket') return;
  try {
    const thread = await m.channel.threads.create({
      name: 'ticket-' + m.author.username, type: ChannelType.PrivateThread, invitable: false,
      autoArchiveDuration: ThreadAutoArchiveDuration.OneHour, reason: 'conformance ticket',
    });
    emit('threadCreated', { id: thread.id, type: thread.type, parent: thread.parentId, invitable: thread.invitable });
    await thread.members.add(m.author.id);
    const member = await thread.members.fetch({ member: m.author.id, force: true });
    emit('memberAdded', { id: thread.id, user: member.id });
    const sent = await thread.send('Support will be with you, <@' + m.author.id + '>.');
    emit('threadMessage', { channel: sent.channelId, id: sent.id });
    const pub = await m.startThread({ name: 'discussion', autoArchiveDuration: ThreadAutoArchiveDuration.OneHour });
    emit('startedFromMessage', { id: pub.id, message: m.id, type: pub.type });
    const active = await m.guild.channels.fetchActiveThreads();
    emit('active', { ids: [...active.threads.keys()] });
    await thread.setArchived(true);
    emit('archived', { id: thread.id, archived: thread.archived });
    const archived = await m.channel.threads.fetchArchived({ type: 'private', fetchAll: true });
    emit('archivedList', { ids: [...archived.threads.keys()] });
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
