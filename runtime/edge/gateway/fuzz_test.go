package gateway

import (
	"bytes"
	"errors"
	"testing"
)

// fuzzSeeds are client payloads the libraries send, plus broken ones.
var fuzzSeeds = []string{
	`{"op":1,"d":null}`,
	`{"op":1,"d":42}`,
	`{"op":2,"d":{"token":"Bot tok-alice","intents":513,"properties":{"$os":"linux","$browser":"DiscordGo v0.29.0","$device":""},"compress":true,"large_threshold":250,"presence":{"since":0,"game":null,"status":"","afk":false}}}`,
	`{"op":2,"d":{"token":"tok-alice","intents":3276799,"properties":{"os":"linux","browser":"discord.js","device":"discord.js"},"shard":[0,1],"large_threshold":50}}`,
	`{"op":6,"d":{"token":"tok-alice","session_id":"0123456789abcdef0123456789abcdef","seq":7}}`,
	`{"op":3,"d":{"since":null,"activities":[],"status":"online","afk":false}}`,
	`{"op":4,"d":{"guild_id":41771983423143937,"channel_id":null,"self_mute":false,"self_deaf":false}}`,
	`{"op":8,"d":{"guild_id":"41771983423143937","query":"","limit":0,"presences":false,"nonce":"x"}}`,
	`{"op":14,"d":{"guild_id":"1","channels":{"2":[[0,99]]}}}`,
	`{"op":31,"d":{"guild_ids":["1"]}}`,
	`{"op":2,"d":{"token":"tok-alice","shard":[1,1]}}`,
	`{"op":"1"}`, `{"op":1e3}`, `[]`, `{"op":2,"d":"x"}`, `{"op":6,"d":{"seq":{}}}`, "\x00\xff",
}

// FuzzDecodeFrame checks the frame decoder on arbitrary bytes: it never
// panics, and what it accepts is a client opcode with a well-formed d.
func FuzzDecodeFrame(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := decodeFrame(b)
		if err != nil {
			if !errors.Is(err, ErrDecode) && !errors.Is(err, ErrUnknownOpcode) {
				t.Fatalf("error %v wraps neither ErrDecode nor ErrUnknownOpcode", err)
			}
			return
		}
		switch fr.Op {
		case OpHeartbeat:
		case OpIdentify:
			if !isObject(fr.D) {
				t.Fatalf("identify d %q", fr.D)
			}
			if id, err := decodeIdentify(fr.D); err == nil {
				if id.HasShard && (id.ShardID < 0 || id.ShardID >= id.ShardCount) {
					t.Fatalf("shard %d/%d accepted", id.ShardID, id.ShardCount)
				}
			}
		case OpResume:
			if r, err := decodeResume(fr.D); err == nil && r.Seq < 0 {
				t.Fatalf("negative seq %d", r.Seq)
			}
		case OpPresenceUpdate, OpVoiceStateUpdate, OpRequestGuildMembers, OpLazyRequest, OpRequestSoundboardSounds:
			if !isObject(fr.D) {
				t.Fatalf("op %d d %q", fr.Op, fr.D)
			}
		default:
			t.Fatalf("accepted op %d", fr.Op)
		}
	})
}

// FuzzHandle drives a connection's payload handler (without a socket)
// with up to eight newline-separated payloads: no input panics, and every
// close the node decides on uses a documented gateway close code.
func FuzzHandle(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(fuzzSeeds[3] + "\n" + fuzzSeeds[0] + "\n" + fuzzSeeds[5] + "\n" + fuzzSeeds[3]))
	f.Add([]byte(fuzzSeeds[4] + "\n" + fuzzSeeds[2]))
	b := newFakeBackend()
	n, err := NewNode(Config{Node: testNode, RateLimit: 6}, b)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { n.Close() })
	f.Fuzz(func(t *testing.T, in []byte) {
		c := newConn(n, nil, 10, compressNone, "ws://127.0.0.1/gateway")
		defer c.cancel()
		for _, p := range bytes.SplitN(in, []byte("\n"), 8) {
			if len(p) > n.cfg.MaxPayload {
				continue
			}
			if c.handle(p) {
				c.qmu.Lock()
				code := c.closeCode
				c.qmu.Unlock()
				if code < 4000 || code > 4014 || code == 4006 {
					t.Fatalf("closed with %d", code)
				}
				break
			}
		}
		if c.sess != nil {
			c.sess.end(t.Context())
		}
		// Drain the fake backend's reports so they never fill up.
		for {
			select {
			case <-b.subs:
			case <-b.discs:
			default:
				return
			}
		}
	})
}
