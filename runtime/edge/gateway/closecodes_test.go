package gateway

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/domain/event"
)

func TestCloseCodes(t *testing.T) {
	type step func(c *client)
	send := func(v any) step { return func(c *client) { c.send(v) } }
	hello := func(c *client) { c.hello() }
	identified := func(c *client) { c.identify("tok-alice") }
	cases := []struct {
		name    string
		query   string
		backend error
		steps   []step
		code    int
	}{
		{"malformed json", "", nil, []step{hello, send(`{"op":2,"d":`)}, CloseDecodeError},
		{"not an object", "", nil, []step{hello, send(`[1,2]`)}, CloseDecodeError},
		{"missing op", "", nil, []step{hello, send(`{"d":{}}`)}, CloseDecodeError},
		{"string op", "", nil, []step{hello, send(`{"op":"2","d":{}}`)}, CloseDecodeError},
		{"identify d not object", "", nil, []step{hello, send(`{"op":2,"d":"tok"}`)}, CloseDecodeError},
		{"identify without token", "", nil, []step{hello, send(`{"op":2,"d":{"intents":1}}`)}, CloseDecodeError},
		{"heartbeat d not a number", "", nil, []step{hello, send(`{"op":1,"d":"x"}`)}, CloseDecodeError},
		{"unknown op", "", nil, []step{hello, send(`{"op":5,"d":{}}`)}, CloseUnknownOpcode},
		{"server op from client", "", nil, []step{hello, send(`{"op":10,"d":{}}`)}, CloseUnknownOpcode},
		{"op 3 before identify", "", nil, []step{hello, send(`{"op":3,"d":{"status":"online"}}`)}, CloseNotAuthenticated},
		{"op 8 before identify", "", nil, []step{hello, send(`{"op":8,"d":{"guild_id":"1"}}`)}, CloseNotAuthenticated},
		{"bad token", "", nil, []step{hello, send(identifyFrame("Bot nope", 1, nil))}, CloseAuthenticationFailed},
		{"empty token", "", nil, []step{hello, send(identifyFrame("", 1, nil))}, CloseAuthenticationFailed},
		{"second identify", "", nil, []step{identified, send(identifyFrame("tok-alice", 1, nil))}, CloseAlreadyAuthenticated},
		{"resume after identify", "", nil, []step{identified, send(`{"op":6,"d":{"token":"tok-alice","session_id":"x","seq":1}}`)}, CloseAlreadyAuthenticated},
		{"unknown intents bit", "", nil, []step{hello, send(identifyFrame("tok-alice", 1<<30, nil))}, CloseInvalidIntents},
		{"intents not a number", "", nil, []step{hello, send(`{"op":2,"d":{"token":"tok-alice","intents":"all"}}`)}, CloseInvalidIntents},
		{"backend invalid intents", "", ErrInvalidIntents, []step{hello, send(identifyFrame("tok-alice", 1, nil))}, CloseInvalidIntents},
		{"disallowed intents", "", ErrDisallowedIntents, []step{hello, send(identifyFrame("tok-alice", 1<<1, nil))}, CloseDisallowedIntents},
		{"shard out of range", "", nil, []step{hello, send(identifyFrame("tok-alice", 1, map[string]any{"shard": []int{2, 2}}))}, CloseInvalidShard},
		{"shard malformed", "", nil, []step{hello, send(identifyFrame("tok-alice", 1, map[string]any{"shard": []int{0}}))}, CloseInvalidShard},
		{"backend invalid shard", "", ErrInvalidShard, []step{hello, send(identifyFrame("tok-alice", 1, nil))}, CloseInvalidShard},
		{"sharding required", "", ErrShardingRequired, []step{hello, send(identifyFrame("tok-alice", 1, nil))}, CloseShardingRequired},
		{"backend failure", "", errors.New("guild tier down"), []step{hello, send(identifyFrame("tok-alice", 1, nil))}, CloseUnknownError},
		{"wrapped auth failure", "", wrap(ErrAuthenticationFailed), []step{hello, send(identifyFrame("tok-alice", 1, nil))}, CloseAuthenticationFailed},
		{"oversize payload", "", nil, []step{hello, send(`{"op":1,"d":null,"pad":"` + strings.Repeat("x", 4096) + `"}`)}, CloseDecodeError},
		{"api version 8", "?v=8&encoding=json", nil, nil, CloseInvalidAPIVersion},
		{"api version junk", "?v=x", nil, nil, CloseInvalidAPIVersion},
		{"etf encoding", "?v=10&encoding=etf", nil, nil, CloseDecodeError},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := newTestGateway(t, Config{})
			g.backend.err = tc.backend
			c := g.dial(t, tc.query)
			for _, s := range tc.steps {
				s(c)
			}
			c.expectClose(tc.code)
		})
	}
}

func wrap(err error) error { return errors.Join(errors.New("token store"), err) }

func TestPayloadAtLimitAccepted(t *testing.T) {
	g := newTestGateway(t, Config{})
	c := g.dial(t, "")
	c.hello()
	// Exactly MaxPayload bytes is allowed.
	f := `{"op":1,"d":null,"pad":"`
	f += strings.Repeat("x", DefaultMaxPayload-len(f)-2) + `"}`
	if len(f) != DefaultMaxPayload {
		t.Fatalf("frame is %d bytes", len(f))
	}
	c.send(f)
	if got := c.read(); got.Op != OpHeartbeatACK {
		t.Fatalf("op %d, want ACK", got.Op)
	}
}

func TestRateLimit(t *testing.T) {
	// The clock is atomic: the node also reads it after each write (the
	// delivery-age metric), concurrently with the test moving it on.
	var nowNS atomic.Int64
	nowNS.Store(time.Unix(1_700_000_000, 0).UnixNano())
	clock := func() time.Time { return time.Unix(0, nowNS.Load()) }
	g := newTestGateway(t, Config{RateLimit: 5, RateWindow: time.Minute, Now: clock})
	c := g.dial(t, "")
	c.hello()
	for range 5 {
		c.send(`{"op":1,"d":null}`)
		if f := c.read(); f.Op != OpHeartbeatACK {
			t.Fatalf("op %d", f.Op)
		}
	}
	c.send(`{"op":1,"d":null}`)
	c.expectClose(CloseRateLimited)

	// The default is 120 payloads per 60 s, counted per connection and
	// reset when the window passes.
	g2 := newTestGateway(t, Config{Now: clock})
	c2 := g2.dial(t, "")
	c2.hello()
	for range DefaultRateLimit {
		c2.send(`{"op":1,"d":null}`)
	}
	for range DefaultRateLimit {
		c2.read()
	}
	nowNS.Add(int64(DefaultRateWindow))
	c2.send(`{"op":1,"d":null}`)
	if f := c2.read(); f.Op != OpHeartbeatACK {
		t.Fatalf("after window: op %d", f.Op)
	}
	nowNS.Add(int64(time.Second))
	for range DefaultRateLimit {
		c2.send(`{"op":1,"d":null}`)
	}
	c2.expectClose(CloseRateLimited)
}

func TestIdentifyTimeout(t *testing.T) {
	g := newTestGateway(t, Config{IdentifyTimeout: 50 * time.Millisecond})
	c := g.dial(t, "")
	c.hello()
	c.expectClose(CloseSessionTimedOut)
}

func TestZombieClosedAndResumable(t *testing.T) {
	// 300 ms leaves the heartbeat loop below (one every ~50 ms) far inside
	// the 450 ms zombie window even on a loaded machine; 100 ms failed in CI
	// when a heartbeat's round trip took longer than the window's slack.
	g := newTestGateway(t, Config{HeartbeatInterval: 300 * time.Millisecond})
	c := g.dial(t, "")
	r := c.identify("tok-alice")
	sid := event.SessionID(r.SessionID)
	// No heartbeat for 1.5 intervals: the node closes the socket.
	c.expectClose(CloseSessionTimedOut)
	g.deliver("MESSAGE_CREATE", `{"n":1}`, sid)
	c2 := g.dial(t, "")
	c2.hello()
	c2.send(map[string]any{"op": 6, "d": map[string]any{"token": "Bot tok-alice", "session_id": r.SessionID, "seq": 1}})
	c2.readDispatch("MESSAGE_CREATE", 2)
	c2.readDispatch("RESUMED", 3)
	// Heartbeats keep a connection alive past the zombie timeout.
	for range 4 {
		time.Sleep(50 * time.Millisecond) // pacing the client's heartbeats, not synchronising
		c2.send(`{"op":1,"d":3}`)
		if f := c2.read(); f.Op != OpHeartbeatACK {
			t.Fatalf("op %d", f.Op)
		}
	}
}
