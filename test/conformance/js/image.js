// An unmodified discord.js image bot driven by the Go conformance test
// (webhooks_threads_integration_test.go). On READY it registers /cat and
// /cats in its guild; /cat replies with a PNG file, /cats defers, edits
// the deferred reply to carry a file and follows up with another. It
// prints one JSON line per step with what the library read back.
// Env: CONCORD_API, CONCORD_TOKEN, CONCORD_GUILD.
'use strict';
const { AttachmentBuilder, Client, Events, GatewayIntentBits } = require('discord.js');

const emit = (ev, fields) => process.stdout.write(JSON.stringify({ ev, ...fields }) + '\n');
const fail = (err) => emit('error', { message: String((err && err.stack) || err) });
// A 1x1 PNG header is enough for a content sniffer.
const png = Buffer.from('89504e470d0a1a0a0000000d4948445200000001000000010802000000', 'hex');
const first = (m) => m.attachments.first() || {};

const client = new Client({ intents: [GatewayIntentBits.Guilds], rest: { api: process.env.CONCORD_API } });

client.once(Events.ClientReady, async (c) => {
  emit('ready', { user: c.user.id });
  try {
    const cat = await c.application.commands.create({ name: 'cat', description: 'A cat picture' }, process.env.CONCORD_GUILD);
    const cats = await c.application.commands.create({ name: 'cats', description: 'Cat pictures, slowly' }, process.env.CONCORD_GUILD);
    emit('registered', { cat: cat.id, cats: cats.id });
  } catch (err) {
    fail(err);
  }
});

client.on(Events.InteractionCreate, async (interaction) => {
  if (!interaction.isChatInputCommand()) return;
  try {
    if (interaction.commandName === 'cat') {
      await interaction.reply({ content: 'a cat', files: [new AttachmentBuilder(png, { name: 'cat.png' })] });
      const reply = await interaction.fetchReply();
      emit('replied', { id: reply.id, count: reply.attachments.size, url: first(reply).url, type: first(reply).contentType });
    } else {
      await interaction.deferReply();
      const edited = await interaction.editReply({ content: 'two cats', files: [{ attachment: png, name: 'one.png' }] });
      emit('edited', { id: edited.id, count: edited.attachments.size, url: first(edited).url, type: first(edited).contentType });
      const follow = await interaction.followUp({ files: [{ attachment: png, name: 'two.png' }] });
      emit('followup', { id: follow.id, count: follow.attachments.size, url: first(follow).url, type: first(follow).contentType });
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
