package gateway

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/domain/event"
)

// queuedOf reports what session id's connection holds back: whether it is
// held and how many frames wait in its queue.
func queuedOf(g *testGateway, id event.SessionID) (held bool, queued int) {
	s := g.node.lookup(id)
	s.mu.Lock()
	c := s.conn
	s.mu.Unlock()
	c.qmu.Lock()
	defer c.qmu.Unlock()
	return c.held, len(c.queue)
}

// TestVoiceAnswerLeavesTogether: the dispatches delivered while op 4's
// handler runs (the guild's VOICE_STATE_UPDATE and VOICE_SERVER_UPDATE)
// are not written one by one: the first stays queued until the handler
// returns, and then both arrive, in order. discord.py loses its wake-up
// when the two reach it in separate reads a few loop iterations apart.
func TestVoiceAnswerLeavesTogether(t *testing.T) {
	type seen struct {
		held   bool
		queued int
	}
	during := make(chan seen, 1)
	var g *testGateway
	g = newTestGateway(t, Config{OpHandlers: map[int]OpHandler{
		OpVoiceStateUpdate: OpHandlerFunc(func(ctx context.Context, s event.Session, op int, d json.RawMessage) error {
			g.deliver("VOICE_STATE_UPDATE", `{"channel_id":"7"}`, s.ID)
			held, queued := queuedOf(g, s.ID)
			during <- seen{held, queued}
			g.deliver("VOICE_SERVER_UPDATE", `{"endpoint":"127.0.0.1:1"}`, s.ID)
			return nil
		}),
	}})
	c := g.dial(t, "")
	r := c.identify("tok-alice")
	c.send(map[string]any{"op": OpVoiceStateUpdate, "d": map[string]any{"guild_id": "41771983423143937", "channel_id": "7", "self_mute": false, "self_deaf": false}})
	c.readDispatch("VOICE_STATE_UPDATE", 2)
	c.readDispatch("VOICE_SERVER_UPDATE", 3)
	if got := <-during; !got.held || got.queued != 1 {
		t.Fatalf("while op 4's handler ran: held=%v queued=%d, want the VOICE_STATE_UPDATE held in the queue", got.held, got.queued)
	}
	// Released: the next dispatch goes out inline again.
	g.deliver("MESSAGE_CREATE", `{"id":"1"}`, event.SessionID(r.SessionID))
	c.readDispatch("MESSAGE_CREATE", 4)
	if held, queued := queuedOf(g, event.SessionID(r.SessionID)); held || queued != 0 {
		t.Fatalf("after op 4: held=%v queued=%d, want neither", held, queued)
	}
}

// TestVoiceAnswerHoldIsBounded: a handler that does not return (here: it
// waits until the client has read what it delivered) keeps the
// connection's frames back for at most maxAnswerHold.
func TestVoiceAnswerHoldIsBounded(t *testing.T) {
	read := make(chan struct{})
	handled := make(chan error, 1)
	var g *testGateway
	g = newTestGateway(t, Config{OpHandlers: map[int]OpHandler{
		OpVoiceStateUpdate: OpHandlerFunc(func(ctx context.Context, s event.Session, op int, d json.RawMessage) error {
			g.deliver("VOICE_STATE_UPDATE", `{"channel_id":"7"}`, s.ID)
			select {
			case <-read:
				handled <- nil
			case <-ctx.Done():
				handled <- ctx.Err()
			}
			return nil
		}),
	}})
	c := g.dial(t, "")
	c.identify("tok-alice")
	start := time.Now()
	c.send(map[string]any{"op": OpVoiceStateUpdate, "d": map[string]any{"guild_id": "41771983423143937", "channel_id": "7"}})
	c.readDispatch("VOICE_STATE_UPDATE", 2)
	close(read)
	if err := <-handled; err != nil {
		t.Fatalf("handler: %v", err)
	}
	if waited := time.Since(start); waited < maxAnswerHold {
		t.Fatalf("the held frame arrived after %v, before the hold's bound %v", waited, maxAnswerHold)
	}
}
