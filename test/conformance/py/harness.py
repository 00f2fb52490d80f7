"""What every conformance bot shares: pointing discord.py at Concord, the
JSON-line events the Go tests read, and the run loop that stops the bot
when the test closes its stdin.

The bots stay unmodified discord.py bots: this only sets the two
documented hooks (Route.BASE and DiscordWebSocket.DEFAULT_GATEWAY) from
CONCORD_HOST and starts the client with CONCORD_TOKEN.
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


def run(client):
    """Runs client until stdin reaches EOF (the test is done); a handler's
    exception or a failed login is reported as an "error" event."""

    @client.event
    async def on_error(event, *args, **kwargs):
        emit("error", message=f"{event}: {traceback.format_exc()}")

    def watch_stdin(loop):
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
