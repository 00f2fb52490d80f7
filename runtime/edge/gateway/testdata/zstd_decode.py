"""Decodes zstd-stream gateway messages with the zstandard package, the way
a client does: one streaming decompressor per connection, fed message after
message. Reads JSON lines {"conn": n, "msg": base64} on stdin and writes,
for each, a JSON line {"conn": n, "text": decoded}; a message that does not
decode to output on its own is an error."""
import base64
import json
import sys

import zstandard

decoders = {}
for line in sys.stdin:
    rec = json.loads(line)
    d = decoders.get(rec["conn"])
    if d is None:
        d = decoders[rec["conn"]] = zstandard.ZstdDecompressor().decompressobj()
    text = d.decompress(base64.b64decode(rec["msg"]))
    if not text:
        sys.exit("connection %d: a message decoded to nothing" % rec["conn"])
    print(json.dumps({"conn": rec["conn"], "text": text.decode()}), flush=True)
