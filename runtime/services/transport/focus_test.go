package transport

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
)

// callLog is a GuildClient that records the calls that reach it.
type callLog struct {
	GuildClient
	mu    sync.Mutex
	calls []string
}

func (c *callLog) add(s string) {
	c.mu.Lock()
	c.calls = append(c.calls, s)
	c.mu.Unlock()
}

func (c *callLog) Subscribe(_ context.Context, g snowflake.ID, s event.Session) error {
	c.add("subscribe " + string(s.ID))
	return nil
}

func (c *callLog) SubscribeMoved(_ context.Context, g snowflake.ID, s event.Session, _ bool) error {
	c.add("subscribe-moved " + string(s.ID))
	return nil
}

func (c *callLog) LazyRequest(_ context.Context, g snowflake.ID, s event.Session, d json.RawMessage) error {
	c.add("op14 " + string(s.ID) + " " + string(d))
	return nil
}

func (c *callLog) Disconnect(_ context.Context, g snowflake.ID, s event.Session) error {
	c.add("disconnect " + string(s.ID))
	return nil
}

func (c *callLog) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.calls
	c.calls = nil
	return out
}

// TestRememberFocusReplaysAfterResubscribe: a guild that moved to another
// guild node gets each session's latest op 14 that named channels again
// once the gateway subscribed the session there (the new owner starts
// without the session's active channels); an op 14 without channels does
// not replace it, and a session that left the guild has nothing replayed.
func TestRememberFocusReplaysAfterResubscribe(t *testing.T) {
	ctx := context.Background()
	inner := &callLog{}
	c := RememberFocus(inner, nil)
	const g snowflake.ID = 7
	s := event.Session{ID: "s1"}
	focus := json.RawMessage(`{"guild_id":"7","channels":{"70":[[0,99]]}}`)
	if err := c.Subscribe(ctx, g, s); err != nil {
		t.Fatal(err)
	}
	if err := c.LazyRequest(ctx, g, s, focus); err != nil {
		t.Fatal(err)
	}
	if err := c.LazyRequest(ctx, g, s, json.RawMessage(`{"guild_id":"7","typing":true}`)); err != nil {
		t.Fatal(err)
	}
	inner.take()
	// The guild moved: the gateway subscribes the session on the new
	// owner, flagged as moved.
	if err := c.SubscribeMoved(ctx, g, s, false); err != nil {
		t.Fatal(err)
	}
	want := []string{"subscribe-moved s1", "op14 s1 " + string(focus)}
	if got := inner.take(); !slices.Equal(got, want) {
		t.Fatalf("resubscribe sent %q, want %q", got, want)
	}
	// Another guild of the session, or another session, has no focus.
	if err := c.Subscribe(ctx, g+1, s); err != nil {
		t.Fatal(err)
	}
	if got := inner.take(); !slices.Equal(got, []string{"subscribe s1"}) {
		t.Fatalf("subscribe to another guild sent %q", got)
	}
	if err := c.Disconnect(ctx, g, s); err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe(ctx, g, s); err != nil {
		t.Fatal(err)
	}
	if got := inner.take(); !slices.Equal(got, []string{"disconnect s1", "subscribe s1"}) {
		t.Fatalf("after the session left the guild: %q", got)
	}
}
