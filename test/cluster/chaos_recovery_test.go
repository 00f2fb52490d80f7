//go:build integration && chaos

package cluster

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// chaosHarness judges whether the cluster is back after a kill.
type chaosHarness struct {
	tr       *chaosTraffic
	clients  []*chaosClient
	tickers  []chaosTicker           // users changing their presence
	users    map[*chaosClient]string // each client's user id
	channels []string
}

// backSince reports when everything flowed again after since: every
// writer had a message acknowledged whose first attempt was sent after
// since, every session is live and received a message of every channel
// posted after since, an ack sent after since succeeded, and every
// observer saw a presence change sent after since. The time is that of
// the last of these events; missing names what has not happened yet.
func (h *chaosHarness) backSince(since time.Time) (at chaosBack, missing []string) {
	acks, reads, ticks := h.tr.snapshot()
	later := func(at *time.Time, t time.Time) {
		if t.After(*at) {
			*at = t
		}
	}
	// Writers, and which messages count.
	after := map[string]string{} // message id → channel, for posts sent after since
	firstAck := map[int]time.Time{}
	for _, a := range acks {
		if !a.sentAt.After(since) {
			continue
		}
		after[a.id] = a.channel
		if f, ok := firstAck[a.writer]; !ok || a.ackedAt.Before(f) {
			firstAck[a.writer] = a.ackedAt
		}
	}
	for w := range len(h.channels) {
		if f, ok := firstAck[w]; ok {
			later(&at.writes, f)
		} else {
			missing = append(missing, fmt.Sprintf("writer %d's posts", w))
		}
	}
	// Sessions.
	tickSent := map[string]time.Time{}
	for _, tk := range ticks {
		tickSent[tk.name] = tk.sentAt
	}
	for _, c := range h.clients {
		c.mu.Lock()
		live := c.live
		first := map[string]time.Time{}
		var presence time.Time
		for _, s := range c.sessions {
			for _, f := range s.frames {
				if !f.At.After(since) {
					continue
				}
				switch f.Type {
				case "MESSAGE_CREATE":
					for _, m := range messages([]dispatch{f}) {
						if ch, ok := after[m.ID]; ok {
							if _, seen := first[ch]; !seen {
								first[ch] = f.At
							}
						}
					}
				case "PRESENCE_UPDATE":
					for _, tk := range h.tickers {
						if p, ok := presenceOf(f, tk.user); ok && presence.IsZero() && tk.user != h.users[c] {
							if sent, ok := tickSent[p.name]; ok && sent.After(since) {
								presence = f.At
							}
						}
					}
				}
			}
		}
		c.mu.Unlock()
		if !live {
			missing = append(missing, c.name+" connected")
		}
		for _, ch := range h.channels {
			if f, ok := first[ch]; ok {
				later(&at.sessions, f)
			} else {
				missing = append(missing, c.name+" receiving channel "+ch)
			}
		}
		{
			if presence.IsZero() {
				missing = append(missing, c.name+" seeing a presence change")
			} else {
				later(&at.presence, presence)
			}
		}
	}
	// Acks.
	var read time.Time
	for _, r := range reads {
		if r.sentAt.After(since) && (read.IsZero() || r.doneAt.Before(read)) {
			read = r.doneAt
		}
	}
	if read.IsZero() {
		missing = append(missing, "an ack")
	} else {
		later(&at.acks, read)
	}
	return at, missing
}

// chaosBack is when each part of the traffic was back after a kill.
type chaosBack struct {
	writes, sessions, acks, presence time.Time
}

// chaosRecovery is how long after a kill each part was back.
type chaosRecovery struct {
	all, writes, sessions, acks, presence time.Duration
}

func (r chaosRecovery) String() string {
	return fmt.Sprintf("%v (writes %v, sessions %v, acks %v, presence %v)", r.all.Round(time.Millisecond),
		r.writes.Round(time.Millisecond), r.sessions.Round(time.Millisecond), r.acks.Round(time.Millisecond), r.presence.Round(time.Millisecond))
}

// awaitBack waits until backSince(since) reports everything back and
// returns how long after since each part was; the timeout passing fails
// the test with what is still missing and the traffic's failures.
func (h *chaosHarness) awaitBack(t *testing.T, what string, since time.Time, timeout time.Duration) chaosRecovery {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		at, missing := h.backSince(since)
		if len(missing) == 0 {
			r := chaosRecovery{writes: at.writes.Sub(since), sessions: at.sessions.Sub(since), acks: at.acks.Sub(since), presence: at.presence.Sub(since)}
			r.all = max(r.writes, r.sessions, r.acks, r.presence)
			return r
		}
		if time.Now().After(deadline) {
			var drops []string
			for _, c := range h.clients {
				c.mu.Lock()
				if len(c.drops) > 0 {
					drops = append(drops, fmt.Sprintf("%s: %v", c.name, c.drops))
				}
				c.mu.Unlock()
			}
			t.Fatalf("%s: not back %v after %s: missing %s; failed attempts %v; client drops:\n%s",
				what, timeout, since.Format("15:04:05.000"), strings.Join(missing, ", "), h.tr.failureSummary(), strings.Join(drops, "\n"))
		}
		time.Sleep(50 * time.Millisecond) // polling the recorded traffic: each source has its own events
	}
}
