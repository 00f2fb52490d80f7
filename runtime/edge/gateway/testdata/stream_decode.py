"""Decodes zlib-stream and zstd-stream gateway messages as discord.py 2.7
does, one decoder per connection fed message after message.

zstd-stream goes through discord.py's own decompression context
(discord.utils._ZstdDecompressionContext: the zstandard package's
decompressobj, which decodes a single frame). zlib-stream goes through
zlib.decompressobj with discord.py's algorithm (buffer until a message ends
with the sync-flush marker, then decompress); discord.py only defines that
class when no zstd library is installed, so it is restated here.

Reads JSON lines {"mode": ..., "conn": n, "msg": base64} on stdin and writes,
for each, {"conn": n, "text": decoded}. A message that decodes to nothing
is an error."""
import base64
import json
import sys
import zlib

import discord.utils

if discord.utils._ZSTD_SOURCE != "zstandard":
    sys.exit("discord.py found no zstandard package: the venv lacks it")


class ZlibContext:
    def __init__(self):
        self.buffer = bytearray()
        self.context = zlib.decompressobj()

    def decompress(self, data):
        self.buffer.extend(data)
        if len(data) < 4 or data[-4:] != b"\x00\x00\xff\xff":
            return None
        msg = self.context.decompress(self.buffer)
        self.buffer = bytearray()
        return msg.decode("utf-8")


decoders = {}
for line in sys.stdin:
    rec = json.loads(line)
    key = (rec["mode"], rec["conn"])
    d = decoders.get(key)
    if d is None:
        if rec["mode"] == "zstd-stream":
            d = discord.utils._ZstdDecompressionContext()
        else:
            d = ZlibContext()
        decoders[key] = d
    text = d.decompress(base64.b64decode(rec["msg"]))
    if not text:
        sys.exit("%s connection %d: a message decoded to nothing" % key)
    print(json.dumps({"conn": rec["conn"], "text": text}), flush=True)
