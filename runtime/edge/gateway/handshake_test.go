package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/domain/event"
)

func TestHandshakeReadyShape(t *testing.T) {
	g := newTestGateway(t, Config{})
	for _, q := range []string{"?v=10&encoding=json", "?v=9&encoding=json", "/?v=9&encoding=json"} {
		t.Run(q, func(t *testing.T) {
			c := g.dial(t, q)
			if got := c.hello(); got != DefaultHeartbeatInterval {
				t.Fatalf("heartbeat_interval %v, want %v", got, DefaultHeartbeatInterval)
			}
			// discordgo: "Bot " prefix, $-properties, legacy presence, compress false.
			c.send(map[string]any{"op": 2, "d": map[string]any{
				"token":           "Bot tok-alice",
				"intents":         1 | 1<<9 | 1<<15,
				"large_threshold": 250,
				"compress":        false,
				"properties":      map[string]any{"$os": "linux", "$browser": "DiscordGo v0.29.0", "$device": ""},
				"presence":        map[string]any{"since": 0, "game": map[string]any{"name": ""}, "status": "", "afk": false},
			}})
			r := c.ready()
			wantV := 10
			if strings.Contains(q, "v=9") {
				wantV = 9
			}
			if r.V != wantV {
				t.Errorf("v %d, want %d", r.V, wantV)
			}
			if r.User["id"] != "1001" || r.User["discriminator"] != "0" {
				t.Errorf("user %v", r.User)
			}
			if len(r.Guilds) != 2 || r.Guilds[0]["id"] != "41771983423143937" || r.Guilds[0]["unavailable"] != true {
				t.Errorf("guilds %v", r.Guilds)
			}
			if len(r.SessionID) != 32 || r.SessionType != "normal" {
				t.Errorf("session %q type %q", r.SessionID, r.SessionType)
			}
			if want := g.url(""); r.ResumeGatewayURL != want {
				t.Errorf("resume_gateway_url %q, want %q", r.ResumeGatewayURL, want)
			}
			if r.Application["id"] != "1001" || r.Application["flags"] != float64(0) {
				t.Errorf("application %v", r.Application)
			}
			if r.PrivateChannels == nil || r.Shard != nil {
				t.Errorf("private_channels %v shard %v", r.PrivateChannels, r.Shard)
			}
			for _, k := range []string{"private_channels", "relationships", "presences", "guild_join_requests", "geo_ordered_rtc_regions"} {
				if string(r.Raw[k]) != "[]" {
					t.Errorf("%s = %s, want []", k, r.Raw[k])
				}
			}
			if string(r.Raw["user_settings"]) != "{}" {
				t.Errorf("user_settings = %s", r.Raw["user_settings"])
			}
			s := waitSession(t, g.backend.subs, "subscribe")
			if s.ID != event.SessionID(r.SessionID) || s.UserID != 1001 || !s.Bot || s.Node != testNode || s.Intents != 1|1<<9|1<<15 {
				t.Fatalf("subscribed session %+v", s)
			}
			// discordgo heartbeats d:0 before any dispatch; discord.js sends null.
			c.send(`{"op":1,"d":0}`)
			if f := c.read(); f.Op != OpHeartbeatACK {
				t.Fatalf("heartbeat answered with op %d", f.Op)
			}
			c.send(`{"op":1,"d":null}`)
			if f := c.read(); f.Op != OpHeartbeatACK {
				t.Fatalf("heartbeat answered with op %d", f.Op)
			}
			// GUILD_CREATEs arrive through Deliver with the next sequence numbers.
			g.deliver("GUILD_CREATE", `{"id":"41771983423143937","unavailable":false}`, s.ID)
			g.deliver("GUILD_CREATE", `{"id":"41771983423143938","unavailable":false}`, s.ID)
			f := c.readDispatch("GUILD_CREATE", 2)
			if !strings.Contains(string(f.D), `"41771983423143937"`) {
				t.Fatalf("GUILD_CREATE d %s", f.D)
			}
			c.readDispatch("GUILD_CREATE", 3)
		})
	}
}

func TestReadyShardAndPublicURL(t *testing.T) {
	g := newTestGateway(t, Config{PublicURL: "wss://gw.example.test/gateway"})
	c := g.dial(t, "?v=10&encoding=json")
	c.hello()
	c.send(identifyFrame("tok-bob", 1, map[string]any{"shard": []int{1, 4}}))
	r := c.ready()
	if len(r.Shard) != 2 || r.Shard[0] != 1 || r.Shard[1] != 4 {
		t.Fatalf("shard %v, want [1 4]", r.Shard)
	}
	if r.ResumeGatewayURL != "wss://gw.example.test/gateway" {
		t.Fatalf("resume_gateway_url %q", r.ResumeGatewayURL)
	}
	s := waitSession(t, g.backend.subs, "subscribe")
	if s.ShardID != 1 || s.ShardCount != 4 {
		t.Fatalf("session shard %d/%d", s.ShardID, s.ShardCount)
	}
}

func TestPerSessionSequencesAndVariants(t *testing.T) {
	g := newTestGateway(t, Config{})
	a := g.dial(t, "")
	ra := a.identify("tok-alice")
	b := g.dial(t, "")
	rb := b.identify("tok-bob")
	// a gets an extra event first, so the sessions' sequences differ.
	g.deliver("TYPING_START", `{"user_id":"1"}`, event.SessionID(ra.SessionID))
	g.node.Deliver(context.Background(), testNode, event.Batch{
		Type:     "MESSAGE_CREATE",
		Payloads: []json.RawMessage{json.RawMessage(`{"content":"full"}`), json.RawMessage(`{"content":""}`)},
		Targets: []event.Target{
			{Session: event.SessionID(ra.SessionID), Variant: 0},
			{Session: event.SessionID(rb.SessionID), Variant: 1},
			{Session: "unknown-session", Variant: 0},
			{Session: event.SessionID(rb.SessionID), Variant: 7},
		},
	})
	a.readDispatch("TYPING_START", 2)
	fa := a.readDispatch("MESSAGE_CREATE", 3)
	fb := b.readDispatch("MESSAGE_CREATE", 2)
	if string(fa.D) != `{"content":"full"}` || string(fb.D) != `{"content":""}` {
		t.Fatalf("variants: a %s, b %s", fa.D, fb.D)
	}
	// A batch for another node is not delivered here.
	g.node.Deliver(context.Background(), "other-node", event.Batch{Type: "X", Payloads: []json.RawMessage{json.RawMessage(`{}`)},
		Targets: []event.Target{{Session: event.SessionID(ra.SessionID)}}})
	if err := g.node.SendTo(event.SessionID(ra.SessionID), "SESSION_EVENT", json.RawMessage(`{"ok":true}`)); err != nil {
		t.Fatal(err)
	}
	a.readDispatch("SESSION_EVENT", 4)
	if err := g.node.SendTo("nope", "X", nil); err == nil {
		t.Fatal("SendTo unknown session succeeded")
	}
	if n := g.node.Sessions(); n != 2 {
		t.Fatalf("Sessions() = %d, want 2", n)
	}
}

func TestClientOpsAcceptedAndHandlerHook(t *testing.T) {
	got := make(chan string, 8)
	h := OpHandlerFunc(func(ctx context.Context, s event.Session, op int, d json.RawMessage) error {
		got <- string(d)
		if strings.Contains(string(d), "boom") {
			return &CloseError{Code: CloseDecodeError, Reason: "bad request"}
		}
		return nil
	})
	g := newTestGateway(t, Config{OpHandlers: map[int]OpHandler{OpRequestGuildMembers: h}})
	c := g.dial(t, "")
	c.identify("tok-alice")
	for _, f := range []string{
		`{"op":3,"d":{"since":null,"activities":[],"status":"online","afk":false}}`,
		`{"op":4,"d":{"guild_id":41771983423143937,"channel_id":null,"self_mute":false,"self_deaf":false}}`,
		`{"op":14,"d":{"guild_id":"41771983423143937","channels":{}}}`,
		`{"op":31,"d":{"guild_ids":["1"]}}`,
		`{"op":8,"d":{"guild_id":41771983423143937,"query":"","limit":0}}`,
	} {
		c.send(f)
	}
	c.send(`{"op":1,"d":1}`)
	if f := c.read(); f.Op != OpHeartbeatACK {
		t.Fatalf("after client ops got op %d, want ACK", f.Op)
	}
	select {
	case d := <-got:
		if !strings.Contains(d, "41771983423143937") {
			t.Fatalf("op 8 handler got %s", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("op 8 handler not called")
	}
	c.send(`{"op":8,"d":{"guild_id":"1","query":"boom"}}`)
	c.expectClose(CloseDecodeError)
}

func TestDrainSendsReconnect(t *testing.T) {
	g := newTestGateway(t, Config{})
	c := g.dial(t, "")
	r := c.identify("tok-alice")
	if err := g.node.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if f := c.read(); f.Op != OpReconnect || string(f.D) != "null" {
		t.Fatalf("got op %d d %s, want op 7", f.Op, f.D)
	}
	// The session stays resumable: a client that closes non-1000 resumes.
	c.ws.Close()
	c2 := g.dial(t, "")
	c2.hello()
	c2.send(map[string]any{"op": 6, "d": map[string]any{"token": "tok-alice", "session_id": r.SessionID, "seq": 1}})
	c2.readDispatch("RESUMED", 2)
	// New identifies are refused while draining.
	c3 := g.dial(t, "")
	c3.hello()
	c3.send(identifyFrame("tok-bob", 1, nil))
	if f := c3.read(); f.Op != OpInvalidSession || string(f.D) != "false" {
		t.Fatalf("identify while draining: op %d d %s", f.Op, f.D)
	}
}

func TestFrameLengths(t *testing.T) {
	// One payload per WebSocket length encoding: 7-bit, 16-bit, 64-bit.
	g := newTestGateway(t, Config{})
	c := g.dial(t, "")
	r := c.identify("tok-alice")
	sizes := []int{10, 200, 70000, 300000}
	for _, n := range sizes {
		g.deliver("GUILD_CREATE", `{"pad":"`+strings.Repeat("g", n)+`"}`, event.SessionID(r.SessionID))
	}
	for i, n := range sizes {
		f := c.readDispatch("GUILD_CREATE", int64(i+2))
		if len(f.D) != n+10 {
			t.Fatalf("payload %d: %d bytes of d", n, len(f.D))
		}
	}
}

func TestIdentifyPresenceGoesToOp3Handler(t *testing.T) {
	got := make(chan string, 2)
	h := OpHandlerFunc(func(ctx context.Context, s event.Session, op int, d json.RawMessage) error {
		if op != OpPresenceUpdate || s.UserID != 1001 {
			t.Errorf("op %d for user %d", op, s.UserID)
		}
		got <- string(d)
		return errors.New("legacy presence shape")
	})
	g := newTestGateway(t, Config{OpHandlers: map[int]OpHandler{OpPresenceUpdate: h}})
	c := g.dial(t, "")
	c.hello()
	c.send(identifyFrame("tok-alice", 1, map[string]any{"presence": map[string]any{"status": "", "game": map[string]any{"name": "x"}}}))
	c.ready()
	select {
	case d := <-got:
		if !strings.Contains(d, `"game"`) {
			t.Fatalf("presence %s", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("op 3 handler not called with IDENTIFY's presence")
	}
	// The handler's error does not close the connection.
	c.send(`{"op":1,"d":1}`)
	if f := c.read(); f.Op != OpHeartbeatACK {
		t.Fatalf("op %d", f.Op)
	}
}
