"""An unmodified discord.py forum bot driven by the Go conformance test.

Once ready it reads the forum CONCORD_FORUM from its cache (tags
included), opens a post tagged "bug" with a starter message, reads the
starter message back (the post's message with the post's id), replies in
the post and retags it, then opens a second post whose starter message
carries a PNG file (multipart), printing one JSON line per step (like
js/forum.js). Env: CONCORD_HOST, CONCORD_TOKEN, CONCORD_FORUM. Closing
stdin stops it.
"""

import io
import os
import traceback

import discord

from harness import emit, run


discord.utils.setup_logging()

# A 1x1 PNG header is enough for a content sniffer.
PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010802000000")

client = discord.Client(intents=discord.Intents.default())


@client.event
async def on_ready():
    emit("ready", user=str(client.user.id))
    try:
        forum = client.get_channel(int(os.environ["CONCORD_FORUM"]))
        emit("forum", id=str(forum.id), type=forum.type.value, isForum=isinstance(forum, discord.ForumChannel),
             tags=[t.name for t in forum.available_tags])
        bug = discord.utils.get(forum.available_tags, name="bug")
        made = await forum.create_thread(name="it crashes", content="when I click", applied_tags=[bug])
        post = made.thread
        emit("posted", id=str(post.id), parent=str(post.parent_id), tags=[str(t.id) for t in post.applied_tags],
             lastMessage=str(post.last_message_id))
        starter = await post.fetch_message(post.id)
        emit("starter", id=str(starter.id), channel=str(starter.channel.id), content=starter.content)
        reply = await post.send("fixed in the next release")
        emit("replied", id=str(reply.id), channel=str(reply.channel.id))
        retagged = await post.edit(applied_tags=[])
        emit("retagged", id=str(retagged.id), tags=[str(t.id) for t in retagged.applied_tags])
        shot = await forum.create_thread(name="screenshot", content="see attached",
                                         file=discord.File(io.BytesIO(PNG), filename="shot.png"))
        first = shot.message
        file = first.attachments[0] if first.attachments else None
        emit("postedFile", id=str(shot.thread.id), channel=str(first.channel.id), content=first.content,
             lastMessage=str(shot.thread.last_message_id), count=len(first.attachments),
             name=file and file.filename, ctype=file and file.content_type, url=file and file.url)
    except Exception:
        emit("error", message=traceback.format_exc())


run(client)
