"""An unmodified discord.py bot driven by the Go conformance test.

It prints one JSON object per line for every event it sees, and it answers
"ping" with a reply, then edits and deletes that reply (like js/bot.js);
"burst N" makes it send N messages at once, past the channel's rate limit,
and every 429 discord.py's HTTP client retries is printed as "rate_limited".
Env: CONCORD_HOST (host:port of the server), CONCORD_TOKEN (a bot token).
Closing stdin stops it.
"""

import asyncio
import logging
import traceback

import discord

from harness import emit, run


discord.utils.setup_logging()  # to stderr, which the test logs on failure


class RateLimitLog(logging.Handler):
    """Prints each 429 that discord.py's HTTP client waits out and retries."""

    def emit(self, record):
        if record.getMessage().startswith("We are being rate limited."):
            emit("rate_limited", message=record.getMessage())


logging.getLogger("discord.http").addHandler(RateLimitLog(logging.WARNING))

intents = discord.Intents.default()
intents.message_content = True
client = discord.Client(intents=intents)


@client.event
async def on_ready():
    app = await client.application_info()
    emit(
        "ready",
        user=str(client.user.id),
        application=str(app.id),
        guilds=[{"id": str(g.id), "channels": [str(c.id) for c in g.channels]} for g in client.guilds],
    )


@client.event
async def on_resumed():
    emit("resumed")


@client.event
async def on_disconnect():
    emit("disconnect")


@client.event
async def on_message(message):
    emit(
        "message_create",
        id=str(message.id),
        channel=str(message.channel.id),
        guild=str(message.guild.id) if message.guild else None,
        content=message.content,
        author=str(message.author.id),
    )
    if message.author.id == client.user.id:
        return
    if message.content.startswith("burst "):
        try:
            n = int(message.content.split()[1])
            sent = await asyncio.gather(*(message.channel.send(f"burst {i}") for i in range(n)))
            emit("burst", ids=[str(m.id) for m in sent])
        except Exception:
            emit("error", message=traceback.format_exc())
        return
    if message.content != "ping":
        return
    try:
        reply = await message.reply("pong")
        ref = reply.reference.message_id if reply.reference else None
        emit("replied", id=str(reply.id), reference=str(ref) if ref else None)
        edited = await reply.edit(content="pong (edited)")
        emit("edited", id=str(edited.id), content=edited.content,
             edited_at=edited.edited_at.isoformat() if edited.edited_at else None)
        await edited.delete()
        emit("deleted", id=str(edited.id))
    except Exception:
        emit("error", message=traceback.format_exc())


@client.event
async def on_raw_message_edit(payload):
    emit("message_update", id=str(payload.message_id), content=payload.data.get("content"))


@client.event
async def on_raw_message_delete(payload):
    emit("message_delete", id=str(payload.message_id))


run(client)
