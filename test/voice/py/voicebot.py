"""An unmodified discord.py 2.7.1 bot that joins a voice channel on
Concord, driven by the Go tests (test/voice/concord_integration_test.go).

Nothing is faked: discord.py logs in to `concord dev` (pointed at it the
documented way, Route.BASE and DiscordWebSocket.DEFAULT_GATEWAY), sends op
4 over Concord's chat gateway and gets VOICE_STATE_UPDATE and
VOICE_SERVER_UPDATE from the guild. Everything voice (the voice gateway
over wss with Concord's dev CA via SSL_CERT_FILE, IP discovery, xchacha20
rtpsize, playing, and receiving through discord-ext-voice-recv's
BasicSink(decode=False)) is the libraries' own code.

Env: CHAT_HOST, BOT_TOKEN, CHANNEL_ID, TONE (Ogg Opus to play, optional),
OUT (JSON results), DURATION (seconds to stay after playing), WAIT_STDIN
(print "joined", then wait for a line on stdin before playing).
"""

import asyncio
import base64
import json
import os
import sys
import traceback

import discord
import yarl
from discord.ext import voice_recv

HOST = os.environ["CHAT_HOST"]
discord.http.Route.BASE = f"http://{HOST}/api/v10"
discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(f"ws://{HOST}/")

out = {"ready": False, "played": False, "received": [], "error": ""}


class OggOpusSource(discord.AudioSource):
    """Pre-encoded Opus packets from an Ogg file: is_opus() is True, so
    discord.py sends them as they are, needing neither FFmpeg nor libopus."""

    def __init__(self, path):
        with open(path, "rb") as f:
            stream = discord.oggparse.OggStream(f)
            self.packets = [p for p in stream.iter_packets() if not p.startswith((b"OpusHead", b"OpusTags"))]
        self.i = 0

    def read(self):
        if self.i >= len(self.packets):
            return b""
        self.i += 1
        return self.packets[self.i - 1]

    def is_opus(self):
        return True


client = discord.Client(intents=discord.Intents.default())


@client.event
async def on_ready():
    try:
        channel = client.get_channel(int(os.environ["CHANNEL_ID"]))
        vc = await channel.connect(cls=voice_recv.VoiceRecvClient, timeout=60)
        out["ready"] = True

        def heard(user, data):
            out["received"].append(base64.b64encode(data.opus).decode())

        vc.listen(voice_recv.BasicSink(heard, decode=False))
        if os.environ.get("WAIT_STDIN"):
            print("joined", flush=True)
            # The test says "go" once everyone is in the call.
            await client.loop.run_in_executor(None, sys.stdin.readline)
        if os.environ.get("TONE"):
            done = asyncio.Event()
            vc.play(OggOpusSource(os.environ["TONE"]), after=lambda e: client.loop.call_soon_threadsafe(done.set))
            await asyncio.wait_for(done.wait(), 60)
            out["played"] = True
        await asyncio.sleep(float(os.environ.get("DURATION", "1.5")))
        await vc.disconnect()
    except Exception:
        out["error"] = traceback.format_exc()
    finally:
        with open(os.environ["OUT"], "w") as f:
            json.dump(out, f)
        await client.close()


# Debug logs go to stderr, which the test keeps and prints on a failure.
discord.utils.setup_logging(level=10)
client.run(os.environ["BOT_TOKEN"], log_handler=None)
