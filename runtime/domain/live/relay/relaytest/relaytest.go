// Package relaytest is the conformance suite of live.Relay: the
// in-process relay runs it always, the Redis relay under the integration
// tag. Two Relay values stand for two processes (router and gateway).
package relaytest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live"
)

type collector struct {
	mu  sync.Mutex
	got []string
	ch  chan struct{}
}

func newCollector() *collector { return &collector{ch: make(chan struct{}, 1000)} }

func (c *collector) deliver(b []byte) {
	c.mu.Lock()
	c.got = append(c.got, string(b))
	c.mu.Unlock()
	c.ch <- struct{}{}
}

func (c *collector) wait(t *testing.T, n int) []string {
	t.Helper()
	for {
		c.mu.Lock()
		if len(c.got) >= n {
			out := append([]string(nil), c.got...)
			c.mu.Unlock()
			return out
		}
		c.mu.Unlock()
		select {
		case <-c.ch:
		case <-time.After(5 * time.Second):
			t.Fatalf("got %d of %d messages", len(c.got), n)
		}
	}
}

// Run runs the suite: pub publishes, sub subscribes (they may be one).
func Run(t *testing.T, pub, sub live.Relay) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s1 := snowflake.FromTime(time.Now())
	s2 := s1 + 1
	a, b, other := newCollector(), newCollector(), newCollector()
	ua, err := sub.Subscribe(ctx, s1, a.deliver)
	if err != nil {
		t.Fatal(err)
	}
	ub, err := sub.Subscribe(ctx, s1, b.deliver)
	if err != nil {
		t.Fatal(err)
	}
	uo, err := sub.Subscribe(ctx, s2, other.deliver)
	if err != nil {
		t.Fatal(err)
	}
	defer uo()
	// Published right after Subscribe returned: delivered, in order, once
	// per subscription.
	for i := range 50 {
		if err := pub.Publish(ctx, s1, []byte(fmt.Sprintf("m%02d", i))); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []*collector{a, b} {
		got := c.wait(t, 50)
		for i, m := range got {
			if m != fmt.Sprintf("m%02d", i) {
				t.Fatalf("message %d = %q", i, m)
			}
		}
	}
	ua()
	pub.Publish(ctx, s1, []byte("after"))
	pub.Publish(ctx, s2, []byte("other"))
	other.wait(t, 1)
	if got := b.wait(t, 51); got[50] != "after" {
		t.Fatalf("remaining subscriber got %q", got[50])
	}
	ub()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.got) != 50 {
		t.Fatalf("unsubscribed collector got %d", len(a.got))
	}
	if len(other.got) != 1 {
		t.Fatalf("other stream got %v", other.got)
	}
}
