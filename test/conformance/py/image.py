"""An unmodified discord.py image bot driven by the Go conformance test.

On READY it syncs /cat and /cats to its guild through the library's
command tree; /cat answers with a PNG file, /cats defers, edits the
deferred response to carry a file and follows up with another, printing
one JSON line per step with what the library read back (like
js/image.js). Env: CONCORD_HOST, CONCORD_TOKEN, CONCORD_GUILD. Closing
stdin stops it.
"""

import io
import os
import traceback

import discord
import discord.webhook.async_

from harness import HOST, emit, run

discord.webhook.async_.Route.BASE = f"http://{HOST}/api/v10"


discord.utils.setup_logging()

intents = discord.Intents.default()
client = discord.Client(intents=intents)
tree = discord.app_commands.CommandTree(client)
GUILD = discord.Object(id=int(os.environ["CONCORD_GUILD"]))
PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010802000000")


def described(m):
    """The first attachment of a message as the library parsed it."""
    a = m.attachments[0] if m.attachments else None
    return dict(id=str(m.id), count=len(m.attachments), url=a.url if a else "", type=a.content_type if a else "")


@tree.command(name="cat", description="A cat picture", guild=GUILD)
async def cat(interaction: discord.Interaction):
    try:
        await interaction.response.send_message("a cat", file=discord.File(io.BytesIO(PNG), filename="cat.png"))
        emit("replied", **described(await interaction.original_response()))
    except Exception:
        emit("error", message=traceback.format_exc())


@tree.command(name="cats", description="Cat pictures, slowly", guild=GUILD)
async def cats(interaction: discord.Interaction):
    try:
        await interaction.response.defer()
        edited = await interaction.edit_original_response(
            content="two cats", attachments=[discord.File(io.BytesIO(PNG), filename="one.png")])
        emit("edited", **described(edited))
        follow = await interaction.followup.send(file=discord.File(io.BytesIO(PNG), filename="two.png"), wait=True)
        emit("followup", **described(follow))
    except Exception:
        emit("error", message=traceback.format_exc())


@client.event
async def on_ready():
    emit("ready", user=str(client.user.id))
    try:
        synced = await tree.sync(guild=GUILD)
        ids = {c.name: str(c.id) for c in synced}
        emit("registered", cat=ids.get("cat", ""), cats=ids.get("cats", ""))
    except Exception:
        emit("error", message=traceback.format_exc())


run(client)
