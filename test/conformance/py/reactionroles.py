"""An unmodified discord.py reaction-role bot driven by the Go conformance test.

Once ready it posts a role menu in CONCORD_CHANNEL and reacts with 🎉
(grants CONCORD_ROLE) and ⭐ (grants CONCORD_HIGH_ROLE, ranked above the
bot's own role, which the server must refuse with 50013). Users'
reactions arrive through on_raw_reaction_add / on_raw_reaction_remove,
the events discord.py delivers whether or not the message is cached;
removing the reaction removes the role. One JSON line per step (like
js/reactionroles.js). Env: CONCORD_HOST, CONCORD_TOKEN, CONCORD_CHANNEL,
CONCORD_ROLE, CONCORD_HIGH_ROLE. Closing stdin stops it.
"""

import os
import traceback

import discord

from harness import emit, run


ROLES = {"🎉": int(os.environ["CONCORD_ROLE"]), "⭐": int(os.environ["CONCORD_HIGH_ROLE"])}


discord.utils.setup_logging()

intents = discord.Intents.default()
client = discord.Client(intents=intents)
menu = {"id": None}


@client.event
async def on_ready():
    emit("ready", user=str(client.user.id))
    try:
        channel = client.get_channel(int(os.environ["CONCORD_CHANNEL"]))
        sent = await channel.send("React for a role: 🎉 party, ⭐ star")
        for e in ROLES:
            await sent.add_reaction(e)
        menu["id"] = sent.id
        fresh = await channel.fetch_message(sent.id)
        emit("posted", message=str(sent.id), reactions=len(fresh.reactions))
    except Exception:
        emit("error", message=traceback.format_exc())


async def apply(payload, ev, grant):
    """Grants or removes the role of the payload's emoji."""
    if payload.user_id == client.user.id or payload.message_id != menu["id"]:
        return
    role_id = ROLES.get(str(payload.emoji))
    if role_id is None:
        return
    emit(ev, message=str(payload.message_id), emoji=str(payload.emoji), user=str(payload.user_id),
         guild=str(payload.guild_id), member=payload.member is not None)
    guild = client.get_guild(payload.guild_id)
    role = guild.get_role(role_id)
    # MESSAGE_REACTION_ADD carries the member; REMOVE does not.
    member = payload.member or await guild.fetch_member(payload.user_id)
    try:
        if grant:
            await member.add_roles(role, reason="reaction role")
        else:
            await member.remove_roles(role, reason="reaction role")
    except discord.HTTPException as err:
        emit("refused", user=str(payload.user_id), role=str(role_id), code=err.code, status=err.status)
        return
    fresh = await guild.fetch_member(payload.user_id)
    emit("granted" if grant else "revoked", user=str(payload.user_id), role=str(role_id),
         has=any(r.id == role_id for r in fresh.roles))


@client.event
async def on_raw_reaction_add(payload):
    await apply(payload, "reactionAdd", True)


@client.event
async def on_raw_reaction_remove(payload):
    await apply(payload, "reactionRemove", False)


run(client)
