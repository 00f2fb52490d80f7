"""An unmodified discord.py forum bot driven by the Go conformance test.

Once ready it reads the forum CONCORD_FORUM from its cache (tags
included), opens a post tagged "bug" with a starter message, reads the
starter message back (the post's message with the post's id), replies in
the post and retags it, printing one JSON line per step (like
js/forum.js). Env: CONCORD_HOST, CONCORD_TOKEN, CONCORD_FORUM. Closing
stdin stops it.
"""

import asyncio
import json
import os
import sys
import threading
import traceback

import discord
import yarl

HOST = os.environ["CONCORD_HOST"]
discord.http.Route.BASE = f"http://{HOST}/api/v10"
discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(f"ws://{HOST}/")


def emit(ev, **fields):
    """Prints one event as a JSON line."""
    print(json.dumps({"ev": ev, **fields}), flush=True)


discord.utils.setup_logging()

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
        emit("posted", id=str(post.id), parent=str(post.parent_id), tags=[str(t.id) for t in post.applied_tags])
        starter = await post.fetch_message(post.id)
        emit("starter", id=str(starter.id), channel=str(starter.channel.id), content=starter.content)
        reply = await post.send("fixed in the next release")
        emit("replied", id=str(reply.id), channel=str(reply.channel.id))
        retagged = await post.edit(applied_tags=[])
        emit("retagged", id=str(retagged.id), tags=[str(t.id) for t in retagged.applied_tags])
    except Exception:
        emit("error", message=traceback.format_exc())


@client.event
async def on_error(event, *args, **kwargs):
    emit("error", message=f"{event}: {traceback.format_exc()}")


def watch_stdin(loop):
    """Closes the client once stdin reaches EOF (the test is done)."""
    sys.stdin.read()
    asyncio.run_coroutine_threadsafe(client.close(), loop)


async def main():
    threading.Thread(target=watch_stdin, args=(asyncio.get_running_loop(),), daemon=True).start()
    try:
        await client.start(os.environ["CONCORD_TOKEN"])
    except Exception:
        emit("error", message="login: " + traceback.format_exc())
        sys.exit(1)


asyncio.run(main())
