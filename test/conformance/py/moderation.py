"""An unmodified discord.py moderation bot driven by the Go conformance test.

When the owner posts "mod <user id>" it answers with an embed, reacts to
the command, lists who reacted, pins the command, bans the user with a
reason (deleting their last minute of messages), reads the ban and the
audit log back and lifts the ban. Given more ids ("mod <user> <kick>
<senior> <owner>") it then kicks <kick> with a reason, reads that audit
entry back, and tries to ban <senior> (ranked above the bot) and to kick
the owner, which the server must refuse. One JSON line per step (like
js/moderation.js). Env: CONCORD_HOST, CONCORD_TOKEN. Closing stdin stops it.
"""

import re
import traceback

import discord

from harness import emit, run


discord.utils.setup_logging()

intents = discord.Intents.default()
intents.message_content = True
client = discord.Client(intents=intents)


@client.event
async def on_ready():
    emit("ready", user=str(client.user.id))


@client.event
async def on_raw_reaction_add(payload):
    emit("reactionAdd", message=str(payload.message_id), emoji=str(payload.emoji), user=str(payload.user_id))


@client.event
async def on_member_ban(guild, user):
    emit("banAdd", user=str(user.id))


@client.event
async def on_message(m):
    match = re.fullmatch(r"mod (\d+)(?: (\d+) (\d+) (\d+))?", m.content)
    if m.author.id == client.user.id or not match:
        return
    target = discord.Object(id=int(match.group(1)))
    try:
        embed = discord.Embed(title="Moderation", description=f"acting on {target.id}", color=0xFF0000)
        embed.add_field(name="target", value=str(target.id), inline=True)
        embed.set_footer(text="concord")
        sent = await m.channel.send(embed=embed)
        emit("embedSent", embeds=len(sent.embeds), title=sent.embeds[0].title, field=sent.embeds[0].fields[0].value)

        await m.add_reaction("👍")
        fresh = await m.channel.fetch_message(m.id)
        users = [str(u.id) async for u in fresh.reactions[0].users()]
        emit("reacted", users=users)

        await m.pin()
        pins = [p async for p in m.channel.pins()]
        emit("pinned", count=len(pins))

        await m.guild.ban(target, reason="conformance ban", delete_message_seconds=60)
        ban = await m.guild.fetch_ban(target)
        emit("banned", user=str(ban.user.id), reason=ban.reason)
        entries = [e async for e in m.guild.audit_logs(limit=5, action=discord.AuditLogAction.ban)]
        first = entries[0] if entries else None
        emit(
            "audit",
            count=len(entries),
            target=str(first.target.id) if first and first.target else "",
            reason=first.reason if first else "",
            executor=str(first.user_id) if first else "",
        )
        await m.guild.unban(target)
        emit("unbanned", user=str(target.id))
        if not match.group(2):
            return
        kick, senior, owner = (discord.Object(id=int(match.group(i))) for i in (2, 3, 4))
        await m.guild.kick(kick, reason="conformance kick")
        kicks = [e async for e in m.guild.audit_logs(limit=5, action=discord.AuditLogAction.kick)]
        k = kicks[0] if kicks else None
        emit(
            "kicked",
            user=str(kick.id),
            target=str(k.target.id) if k and k.target else "",
            reason=k.reason if k else "",
            executor=str(k.user_id) if k else "",
        )
        for action, who in (("ban", senior), ("kick", owner)):
            try:
                if action == "ban":
                    await m.guild.ban(who, reason="above me")
                else:
                    await m.guild.kick(who, reason="the owner")
                emit("error", message=f"{action} of {who.id} was allowed")
            except discord.HTTPException as err:
                emit("refused", action=action, user=str(who.id), code=err.code, status=err.status)
    except Exception:
        emit("error", message=traceback.format_exc())


run(client)
