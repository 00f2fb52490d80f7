"""An unmodified discord.py logging bot driven by the Go conformance test.

When the owner posts "log <text>" it creates a channel webhook, lists the
channel's webhooks, posts the text through the webhook with a username
override, an embed and a file, edits and deletes that message, renames and
deletes the webhook and reads the webhook entries of the audit log back,
printing one JSON line per step (like js/logging.js). Env: CONCORD_HOST,
CONCORD_TOKEN. Closing stdin stops it.
"""

import asyncio
import io
import traceback

import discord
import discord.webhook.async_

from harness import HOST, emit, run

discord.webhook.async_.Route.BASE = f"http://{HOST}/api/v10"


discord.utils.setup_logging()

intents = discord.Intents.default()
intents.message_content = True
intents.webhooks = True
client = discord.Client(intents=intents)


@client.event
async def on_ready():
    emit("ready", user=str(client.user.id))


@client.event
async def on_webhooks_update(channel):
    emit("webhooksUpdate", channel=str(channel.id))


@client.event
async def on_message(m):
    if m.webhook_id:
        emit("webhookMessageEvent", id=str(m.id), webhook=str(m.webhook_id), author=m.author.name, content=m.content)
        return
    if m.author.id == client.user.id or not m.content.startswith("log "):
        return
    text = m.content[4:]
    try:
        hook = await m.channel.create_webhook(name="Logger", reason="conformance logging")
        emit("webhookCreated", id=str(hook.id), token=bool(hook.token), channel=str(hook.channel_id))
        hooks = await m.channel.webhooks()
        emit("webhooksListed", count=len(hooks), ids=[str(h.id) for h in hooks])
        embed = discord.Embed(title="Log entry", description=text)
        sent = await hook.send(
            "logged: " + text, username="Audit Trail", embed=embed,
            file=discord.File(io.BytesIO(b"log line\n"), filename="log.txt"), wait=True,
        )
        att = sent.attachments[0] if sent.attachments else None
        emit("webhookSent", id=str(sent.id), webhook=str(sent.webhook_id), author=sent.author.name,
             embeds=len(sent.embeds), attachments=len(sent.attachments),
             url=att.url if att else "", name=att.filename if att else "")
        edited = await hook.edit_message(sent.id, content="edited: " + text)
        emit("webhookEdited", id=str(edited.id), content=edited.content)
        await hook.delete_message(sent.id)
        emit("webhookMessageDeleted", id=str(sent.id))
        # Seven at once: past the webhook's 5 per 2 s, so the library has
        # to follow the bucket headers (or the 429) to deliver them all.
        burst = await asyncio.gather(*(hook.send(f"burst {i}", wait=True) for i in range(7)))
        emit("webhookBurst", count=len(burst), ids=sorted({str(b.id) for b in burst}))
        renamed = await hook.edit(name="Logger 2")
        emit("webhookRenamed", name=renamed.name)
        await hook.delete(reason="conformance cleanup")
        emit("webhookDeleted", id=str(hook.id))
        entries = [e async for e in m.guild.audit_logs(limit=5, action=discord.AuditLogAction.webhook_create)]
        first = entries[0] if entries else None
        emit("audit", count=len(entries), target=str(first.target.id) if first and first.target else "",
             executor=str(first.user_id) if first else "")
    except Exception:
        emit("error", message=traceback.format_exc())


run(client)
