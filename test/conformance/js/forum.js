// An unmodified discord.js forum bot driven by the Go conformance test.
// Once ready it reads the forum CONCORD_FORUM from its cache (tags
// included), opens a post tagged "bug" with a starter message, reads the
// starter message back through the library (which asks the post itself
// for the message with the post's id), replies in the post and retags it;
// then opens a second post whose starter message carries a PNG file
// (multipart payload_json + files[0], as the library sends it).
// One JSON line per step. Env: CONCORD_API, CONCORD_TOKEN, CONCORD_FORUM.
'use strict';
const { ChannelType, Client, Events, GatewayIntentBits } = require('discord.js');

const emit = (ev, fields) => process.stdout.write(JSON.stringify({ ev, ...fields }) + '\n');
const fail = (err) => emit('error', { message: String(err && err.stack || err) });
// A 1x1 PNG header is enough for a content sniffer.
const png = Buffer.from('89504e470d0a1a0a0000000d4948445200000001000000010802000000', 'hex');

const client = new Client({
  intents: [GatewayIntentBits.Guilds, GatewayIntentBits.GuildMessages],
  rest: { api: process.env.CONCORD_API },
});

client.on(Events.ThreadCreate, (th, created) => emit('threadCreateEvent', { id: th.id, created, tags: th.appliedTags }));
client.once(Events.ClientReady, async (c) => {
  emit('ready', { user: c.user.id });
  try {
    const forum = c.channels.cache.get(process.env.CONCORD_FORUM);
    emit('forum', { id: forum.id, type: forum.type, isForum: forum.type === ChannelType.GuildForum,
      tags: forum.availableTags.map((t) => t.name) });
    const bug = forum.availableTags.find((t) => t.name === 'bug');
    const post = await forum.threads.create({ name: 'it crashes', message: { content: 'when I click' }, appliedTags: [bug.id] });
    emit('posted', { id: post.id, parent: post.parentId, tags: post.appliedTags, lastMessage: post.lastMessageId });
    const starter = await post.fetchStarterMessage();
    emit('starter', { id: starter.id, channel: starter.channelId, content: starter.content });
    const reply = await post.send('fixed in the next release');
    emit('replied', { id: reply.id, channel: reply.channelId });
    const retagged = await post.setAppliedTags([]);
    emit('retagged', { id: retagged.id, tags: retagged.appliedTags });
    const shot = await forum.threads.create({ name: 'screenshot',
      message: { content: 'see attached', files: [{ attachment: png, name: 'shot.png' }] } });
    const first = await shot.fetchStarterMessage();
    const file = first.attachments.first() || {};
    emit('postedFile', { id: shot.id, channel: first.channelId, content: first.content, lastMessage: shot.lastMessageId,
      count: first.attachments.size, name: file.name, ctype: file.contentType, url: file.url });
  } catch (err) {
    fail(err);
  }
});
client.on(Events.Error, fail);

process.on('unhandledRejection', fail);
process.stdin.on('end', () => { client.destroy(); process.exit(0); });
process.stdin.resume();

client.login(process.env.CONCORD_TOKEN).catch((err) => {
  emit('error', { message: 'login: ' + String(err && err.stack || err) });
  process.exit(1);
});
