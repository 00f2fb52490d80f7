package presence

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
)

// TestConcurrentGateways runs several gateways connecting, updating,
// disconnecting and re-reporting at once while another goroutine ticks,
// then checks (under -race) that every user's presence matches what the
// gateways last told the service.
func TestConcurrentGateways(t *testing.T) {
	ctx := context.Background()
	s, c, r := newService(t, Config{NodeTTL: time.Hour, UpdateBurst: 1 << 20}, nil)
	gws := make([]*gateway, 4)
	for i := range gws {
		gws[i] = &gateway{name: fmt.Sprint("g", i), sessions: map[event.SessionID]SessionState{}}
	}
	statuses := []Status{Online, Idle, DND, Invisible}
	var wg sync.WaitGroup
	done := make(chan struct{})
	ticked := make(chan struct{})
	go func() {
		defer close(ticked)
		// At most 2,000 ticks of 100 ms: the clock stays far inside the
		// node TTL however the goroutines are scheduled.
		for range 2000 {
			select {
			case <-done:
				return
			default:
				c.Advance(100 * time.Millisecond)
				s.Tick(ctx)
			}
		}
	}()
	for gi, g := range gws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				u := snowflake.ID(1 + (gi*7+i)%25)
				id := event.SessionID(fmt.Sprintf("g%d-u%d", gi, u))
				switch _, ok := g.sessions[id]; {
				case !ok:
					if err := g.connect(ctx, s, SessionState{Session: id, UserID: u, Client: Desktop, Status: Online, UpdatedAt: c.Now()}); err != nil {
						t.Error(err)
						return
					}
				case i%7 == 0:
					s.Disconnect(ctx, id)
					delete(g.sessions, id)
				case i%5 == 0:
					g.report(ctx, s)
				default:
					if err := g.update(ctx, s, c.Now(), id, Update{Status: statuses[i%4], Activities: []Activity{game(fmt.Sprint(i % 3))}}); err != nil {
						t.Error(err)
						return
					}
				}
			}
			g.report(ctx, s)
		}()
	}
	wg.Wait()
	close(done)
	<-ticked
	c.Advance(time.Minute)
	s.Tick(ctx)
	last := map[snowflake.ID]Presence{}
	for _, b := range r.take() {
		last[b.user] = b.p
	}
	for u := snowflake.ID(1); u <= 25; u++ {
		var states []*SessionState
		for _, g := range gws {
			for _, st := range g.sessions {
				if st.UserID == u {
					st := st
					states = append(states, &st)
				}
			}
		}
		want := Fold(states)
		if got := s.Get(u); !got.Equal(want) {
			t.Fatalf("user %d: service %+v, gateways say %+v", u, got, want)
		}
		if b, ok := last[u]; ok && !b.Equal(want) {
			t.Fatalf("user %d: last broadcast %+v, want %+v", u, b, want)
		}
	}
}
