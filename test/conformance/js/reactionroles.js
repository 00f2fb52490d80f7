// An unmodified discord.js reaction-role bot driven by the Go conformance
// test. Once ready it posts a role menu in CONCORD_CHANNEL and reacts to
// it with 🎉 (grants CONCORD_ROLE) and ⭐ (grants CONCORD_HIGH_ROLE, a
// role ranked above the bot's own, which the server must refuse). Users'
// reactions arrive through the library's own messageReactionAdd and
// messageReactionRemove events, with partials so that reactions to
// messages, users and members the cache does not hold still arrive (a
// restarted bot sees its menu only as a partial). Removing the reaction
// removes the role. One JSON line per step. Env: CONCORD_API,
// CONCORD_TOKEN, CONCORD_CHANNEL, CONCORD_ROLE, CONCORD_HIGH_ROLE.
'use strict';
const { Client, Events, GatewayIntentBits, Partials } = require('discord.js');

const emit = (ev, fields) => process.stdout.write(JSON.stringify({ ev, ...fields }) + '\n');
const fail = (err) => emit('error', { message: String(err && err.stack || err) });

const client = new Client({
  intents: [GatewayIntentBits.Guilds, GatewayIntentBits.GuildMessages, GatewayIntentBits.GuildMessageReactions],
  partials: [Partials.Message, Partials.Channel, Partials.Reaction, Partials.User, Partials.GuildMember],
  rest: { api: process.env.CONCORD_API },
});

const roles = { '🎉': process.env.CONCORD_ROLE, '⭐': process.env.CONCORD_HIGH_ROLE };
let menu = null;

client.once(Events.ClientReady, async (c) => {
  emit('ready', { user: c.user.id });
  try {
    const channel = await c.channels.fetch(process.env.CONCORD_CHANNEL);
    const sent = await channel.send('React for a role: 🎉 party, ⭐ star');
    for (const e of Object.keys(roles)) await sent.react(e);
    menu = sent.id;
    // Forget the menu so the users' reactions find it uncached, as they
    // would after a restart: the library must build it from the event.
    channel.messages.cache.delete(sent.id);
    emit('posted', { message: sent.id, reactions: sent.reactions.cache.size });
  } catch (err) {
    fail(err);
  }
});

// onReaction resolves the reaction's member and applies fn to them.
async function onReaction(reaction, user, ev, fn) {
  if (user.id === client.user.id || reaction.message.id !== menu) return;
  const role = roles[reaction.emoji.name];
  if (!role) return;
  emit(ev, { message: reaction.message.id, emoji: reaction.emoji.name, user: user.id,
    partial: reaction.message.partial, guild: reaction.message.guildId });
  const member = await reaction.message.guild.members.fetch(user.id);
  try {
    await fn(member, role);
    const fresh = await reaction.message.guild.members.fetch({ user: user.id, force: true });
    emit(ev === 'reactionAdd' ? 'granted' : 'revoked', { user: user.id, role, has: fresh.roles.cache.has(role) });
  } catch (err) {
    if (err && err.code !== undefined && err.status !== undefined) {
      emit('refused', { user: user.id, role, code: err.code, status: err.status });
      return;
    }
    throw err;
  }
}

client.on(Events.MessageReactionAdd, (reaction, user) =>
  onReaction(reaction, user, 'reactionAdd', (m, role) => m.roles.add(role, 'reaction role')).catch(fail));
client.on(Events.MessageReactionRemove, (reaction, user) =>
  onReaction(reaction, user, 'reactionRemove', (m, role) => m.roles.remove(role, 'reaction role')).catch(fail));
client.on(Events.Error, fail);

process.on('unhandledRejection', fail);
process.stdin.on('end', () => { client.destroy(); process.exit(0); });
process.stdin.resume();

client.login(process.env.CONCORD_TOKEN).catch((err) => {
  emit('error', { message: 'login: ' + String(err && err.stack || err) });
  process.exit(1);
});
