package fleet

import (
	"sync"
	"time"

	"github.com/concord-chat/concord/runtime/domain/voice"
)

// Placing on quality. A server whose network is in trouble (its speakers'
// packets get lost, arrive with jitter, or its WebRTC listeners report
// long round trips) takes no new calls; the calls it has stay (moving a
// call costs its users a reconnect, and the trouble may be theirs). The
// fleet smooths each server's reports (an exponentially weighted mean,
// each report weighing half), so one bad period does not flap placement,
// and uses hysteresis: a server marked poor takes calls again only once
// all its figures fell below half their limits. A report without traffic
// changes nothing: it says nothing about the network. When every server
// is poor, calls still go to the least-loaded one: a call on a lossy
// server beats no call.

// The limits above which a server's recent quality counts as poor.
const (
	// MaxLoss is the share of speakers' packets lost.
	MaxLoss = 0.1
	// MaxJitter is the speakers' interarrival jitter.
	MaxJitter = 40 * time.Millisecond
	// MaxRTT is the round trip WebRTC listeners report.
	MaxRTT = 400 * time.Millisecond
)

// qualityWeight is the weight of a new report in the smoothed figures.
const qualityWeight = 0.5

// serverQuality is one server's smoothed figures.
type serverQuality struct {
	at                time.Time // the last report observed
	seen              bool
	loss, jitter, rtt float64 // jitter and rtt in seconds
	poor              bool
}

// qualities tracks the servers' recent quality from their reports.
type qualities struct {
	mu sync.Mutex
	m  map[string]*serverQuality
}

func newQualities() *qualities { return &qualities{m: map[string]*serverQuality{}} }

// observe folds in a report once (a report read twice counts once).
func (q *qualities) observe(l voice.Load) {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := q.m[l.Server]
	if s == nil {
		s = &serverQuality{}
		q.m[l.Server] = s
	}
	if !l.At.After(s.at) {
		return
	}
	s.at = l.At
	if l.PacketsIn <= 0 && l.RTT <= 0 {
		return
	}
	loss, jitter, rtt := l.LossRatio, l.Jitter.Seconds(), l.RTT.Seconds()
	if !s.seen {
		s.loss, s.jitter, s.rtt, s.seen = loss, jitter, rtt, true
	} else {
		s.loss += qualityWeight * (loss - s.loss)
		s.jitter += qualityWeight * (jitter - s.jitter)
		if l.RTT > 0 {
			s.rtt += qualityWeight * (rtt - s.rtt)
		}
	}
	over := s.loss > MaxLoss || s.jitter > MaxJitter.Seconds() || s.rtt > MaxRTT.Seconds()
	under := s.loss < MaxLoss/2 && s.jitter < MaxJitter.Seconds()/2 && s.rtt < MaxRTT.Seconds()/2
	switch {
	case over:
		s.poor = true
	case under:
		s.poor = false
	}
}

// poor reports whether server's recent quality is poor.
func (q *qualities) poor(server string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := q.m[server]
	return s != nil && s.poor
}

// forget drops servers not in live (gone from the registry).
func (q *qualities) forget(live map[string]voice.Load) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for id := range q.m {
		if _, ok := live[id]; !ok {
			delete(q.m, id)
		}
	}
}
