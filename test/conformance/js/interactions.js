// An unmodified discord.js application bot driven by the Go conformance
// test (interactions_integration_test.go). On READY it registers two guild
// slash commands through REST, then answers /ping with a reply and /slow
// by deferring, editing the deferred reply and sending a followup.
// It prints one JSON object per line for every step.
// Env: CONCORD_API (REST base, e.g. http://127.0.0.1:8080/api),
// CONCORD_TOKEN (the bot token), CONCORD_GUILD (the guild to register in).
'use strict';
const { Client, Events, GatewayIntentBits } = require('discord.js');

const emit = (ev, fields) => process.stdout.write(JSON.stringify({ ev, ...fields }) + '\n');
const fail = (err) => emit('error', { message: String((err && err.stack) || err) });

const client = new Client({
  intents: [GatewayIntentBits.Guilds],
  rest: { api: process.env.CONCORD_API },
});

client.once(Events.ClientReady, async (c) => {
  emit('ready', { user: c.user.id, application: c.application.id });
  try {
    const guild = process.env.CONCORD_GUILD;
    const ping = await c.application.commands.create({ name: 'ping', description: 'Answers pong' }, guild);
    const slow = await c.application.commands.create({ name: 'slow', description: 'Answers after thinking' }, guild);
    emit('registered', { ping: ping.id, slow: slow.id });
  } catch (err) {
    fail(err);
  }
});

client.on(Events.InteractionCreate, async (interaction) => {
  if (!interaction.isChatInputCommand()) return;
  emit('interaction', { id: interaction.id, command: interaction.commandName, user: interaction.user.id });
  try {
    if (interaction.commandName === 'ping') {
      await interaction.reply('pong');
      const reply = await interaction.fetchReply();
      emit('replied', { id: reply.id, content: reply.content });
    } else if (interaction.commandName === 'slow') {
      await interaction.deferReply();
      emit('deferred', { id: interaction.id });
      const edited = await interaction.editReply('slow pong');
      emit('edited', { id: edited.id, content: edited.content });
      const follow = await interaction.followUp('and a followup');
      emit('followup', { id: follow.id, content: follow.content });
    }
  } catch (err) {
    fail(err);
  }
});
client.on(Events.Error, fail);

process.on('unhandledRejection', fail);
process.stdin.on('end', () => { client.destroy(); process.exit(0); });
process.stdin.resume();

client.login(process.env.CONCORD_TOKEN).catch((err) => {
  emit('error', { message: 'login: ' + String((err && err.stack) || err) });
  process.exit(1);
});
