//go:build integration

package cluster

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry"
)

// writerPool posts messages through the API node, one writer per token,
// alternating channels, each with a unique nonce and enforce_nonce.
type writerPool struct {
	api      rest
	tokens   []string
	channels []string
	progress chan struct{}

	mu       sync.Mutex
	acks     []ack
	failures map[string]int
	quit     chan struct{}
	wg       sync.WaitGroup
}

// start runs the writers until stop; phase makes the nonces unique.
func (p *writerPool) start(ctx context.Context, phase string) {
	p.quit = make(chan struct{})
	if p.failures == nil {
		p.failures = map[string]int{}
	}
	for w, tok := range p.tokens {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for n := 0; ; n++ {
				select {
				case <-p.quit:
					return
				default:
				}
				ch := p.channels[n%len(p.channels)]
				nonce := fmt.Sprintf("%s%d-%d", phase, w, n)
				sent := time.Now()
				var m struct {
					ID string `json:"id"`
				}
				rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				status, raw, err := p.api.do(rctx, tok, "POST", "/channels/"+ch+"/messages",
					map[string]any{"content": nonce, "nonce": nonce, "enforce_nonce": true}, &m)
				cancel()
				p.mu.Lock()
				switch {
				case err == nil && status == http.StatusOK && m.ID != "":
					p.acks = append(p.acks, ack{id: m.ID, channel: ch, nonce: nonce, sentAt: sent})
				case err != nil:
					p.failures["transport: "+err.Error()]++
				default:
					p.failures[fmt.Sprintf("%d %s", status, raw)]++
				}
				p.mu.Unlock()
				select {
				case p.progress <- struct{}{}:
				default:
				}
			}
		}()
	}
}

// stop ends the writers after their current request.
func (p *writerPool) stop() {
	close(p.quit)
	p.wg.Wait()
}

func (p *writerPool) acked() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.acks)
}

// await waits until n messages in all were acknowledged.
func (p *writerPool) await(t *testing.T, n int, timeout time.Duration) {
	t.Helper()
	limit := time.After(timeout)
	for p.acked() < n {
		select {
		case <-p.progress:
		case <-limit:
			p.mu.Lock()
			defer p.mu.Unlock()
			t.Fatalf("only %d of %d messages acknowledged within %v; failures: %v", len(p.acks), n, timeout, p.failures)
		}
	}
}

// awaitOwner waits for a ring change after which the main guild's owner
// satisfies want, and returns that owner.
func awaitOwner(t *testing.T, changes <-chan registry.Change, guildID string, want func(string) bool, timeout time.Duration) string {
	t.Helper()
	limit := time.After(timeout)
	for {
		select {
		case c := <-changes:
			if n, ok := c.New.Owner(mustID(t, guildID)); ok && want(n.Name) {
				return n.Name
			}
		case <-limit:
			t.Fatalf("the ring did not move guild %s within %v", guildID, timeout)
		}
	}
}

// awaitGuildCreates waits until every session got a GUILD_CREATE for
// guildID after since and returns when each arrived.
func awaitGuildCreates(t *testing.T, sessions []*wsSession, guildID string, since time.Time) []time.Time {
	t.Helper()
	at := make([]time.Time, len(sessions))
	for i, s := range sessions {
		s.await(t, "a GUILD_CREATE for "+guildID+" after "+since.Format(time.StampMilli), 15*time.Second, func(fs []dispatch) bool {
			for _, a := range guildCreates(fs, guildID) {
				if a.After(since) {
					at[i] = a
					return true
				}
			}
			return false
		})
	}
	return at
}

func latest(ts []time.Time) time.Time {
	var l time.Time
	for _, t := range ts {
		if t.After(l) {
			l = t
		}
	}
	return l
}

// awaitLive waits until each session received every acknowledged message
// whose POST was sent after the session's (re)subscription.
func awaitLive(t *testing.T, sessions []*wsSession, acks []ack, subscribed []time.Time) {
	t.Helper()
	for i, s := range sessions {
		var want []string
		for _, a := range acks {
			if a.sentAt.After(subscribed[i]) {
				want = append(want, a.id)
			}
		}
		s.await(t, fmt.Sprintf("%d messages posted after its subscription", len(want)), 15*time.Second, func(fs []dispatch) bool {
			got := map[string]bool{}
			for _, m := range messages(fs) {
				got[m.ID] = true
			}
			for _, id := range want {
				if !got[id] {
					return false
				}
			}
			return true
		})
	}
}

// awaitLog waits until a line of p's log contains both parts.
func awaitLog(t *testing.T, p *proc, part1, part2 string, timeout time.Duration) {
	t.Helper()
	limit := time.After(timeout)
	for {
		changed := p.logChanged()
		for _, line := range strings.Split(p.output(), "\n") {
			if strings.Contains(line, part1) && strings.Contains(line, part2) {
				return
			}
		}
		select {
		case <-changed:
		case <-p.done:
			t.Fatalf("%s exited", p.name)
		case <-limit:
			t.Fatalf("%s never logged %q with %q within %v", p.name, part1, part2, timeout)
		}
	}
}
