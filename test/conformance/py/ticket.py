"""An unmodified discord.py ticket bot driven by the Go conformance test.

When a member posts "ticket" it opens a private thread for them (not
invitable), adds them, writes in it, starts a public thread from their
message, lists the guild's active threads, archives the ticket and lists
the channel's archived private threads, printing one JSON line per step
(like js/ticket.js). Env: CONCORD_HOST, CONCORD_TOKEN. Closing stdin stops
it.
"""

import traceback

import discord
import discord.webhook.async_

from harness import HOST, emit, run

discord.webhook.async_.Route.BASE = f"http://{HOST}/api/v10"


discord.utils.setup_logging()

intents = discord.Intents.default()
intents.message_content = True
client = discord.Client(intents=intents)


@client.event
async def on_ready():
    emit("ready", user=str(client.user.id))


@client.event
async def on_thread_create(thread):
    # discord.py dispatches on_thread_create only for newly_created threads.
    emit("threadCreateEvent", id=str(thread.id), type=thread.type.value, created=True)


@client.event
async def on_thread_update(before, after):
    emit("threadUpdateEvent", id=str(after.id), archived=after.archived)


@client.event
async def on_message(m):
    if m.author.id == client.user.id or m.content != "ticket":
        return
    try:
        thread = await m.channel.create_thread(
            name=f"ticket-{m.author.name}", type=discord.ChannelType.private_thread, invitable=False,
            auto_archive_duration=60, reason="conformance ticket",
        )
        emit("threadCreated", id=str(thread.id), type=thread.type.value, parent=str(thread.parent_id),
             invitable=thread.invitable)
        await thread.add_user(discord.Object(id=m.author.id))
        member = await thread.fetch_member(m.author.id)
        emit("memberAdded", id=str(thread.id), user=str(member.id))
        sent = await thread.send(f"Support will be with you, <@{m.author.id}>.")
        emit("threadMessage", channel=str(sent.channel.id), id=str(sent.id))
        pub = await m.create_thread(name="discussion", auto_archive_duration=60)
        emit("startedFromMessage", id=str(pub.id), message=str(m.id), type=pub.type.value)
        active = await m.guild.active_threads()
        emit("active", ids=[str(t.id) for t in active])
        thread = await thread.edit(archived=True)
        emit("archived", id=str(thread.id), archived=thread.archived)
        archived = [t async for t in m.channel.archived_threads(private=True)]
        emit("archivedList", ids=[str(t.id) for t in archived])
    except Exception:
        emit("error", message=traceback.format_exc())


run(client)
