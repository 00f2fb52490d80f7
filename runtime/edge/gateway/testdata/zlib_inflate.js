// Decodes zlib-stream gateway messages with Node's zlib, the way
// @discordjs/ws's native-zlib mode does: one streaming Inflate per
// connection, each message written and sync-flushed, its output taken as
// the message's payload. Reads JSON lines {"conn": n, "msg": base64} on
// stdin and writes {"conn": n, "text": decoded} for each.
'use strict';
const zlib = require('node:zlib');
const readline = require('node:readline');

const inflaters = new Map();
function inflaterFor(conn) {
  let s = inflaters.get(conn);
  if (!s) {
    const inflate = zlib.createInflate({ chunkSize: 65535, flush: zlib.constants.Z_SYNC_FLUSH });
    s = { inflate, chunks: [] };
    inflate.on('data', (c) => s.chunks.push(c));
    inflate.on('error', (e) => {
      console.error(`connection ${conn}: ${e.message}`);
      process.exit(1);
    });
    inflaters.set(conn, s);
  }
  return s;
}

async function main() {
  const rl = readline.createInterface({ input: process.stdin });
  for await (const line of rl) {
    const rec = JSON.parse(line);
    const s = inflaterFor(rec.conn);
    s.inflate.write(Buffer.from(rec.msg, 'base64'));
    await new Promise((resolve) => s.inflate.flush(zlib.constants.Z_SYNC_FLUSH, resolve));
    const text = Buffer.concat(s.chunks).toString('utf8');
    s.chunks = [];
    if (text.length === 0) {
      console.error(`connection ${rec.conn}: a message decoded to nothing`);
      process.exit(1);
    }
    process.stdout.write(JSON.stringify({ conn: rec.conn, text }) + '\n');
  }
}
main();
