package router

import (
	"context"
	"math"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live"
)

// staleReactions is how old a second may be and still be published: a
// backlog replayed after a restart is not drawn as bursts.
const staleReactions = 10 * time.Second

type reactionsHandler struct{ r *Router }

func (reactionsHandler) Setup(context.Context, eventlog.Session) error   { return nil }
func (reactionsHandler) Cleanup(context.Context, eventlog.Session) error { return nil }

type window struct {
	stream snowflake.ID
	second int64
}

type sums struct {
	counts      map[string]int64
	firstOffset int64
	demand      float64         // requests the clients made, estimated: each arrived one over its p
	shards      map[string]bool // the stream's shard keys seen in this partition
}

// reportP is the report probability for a stream whose reaction requests
// are estimated at demand a second: the largest power of two that keeps
// them within live.ReactionBudget, at least live.MinReportP.
func reportP(demand float64) float64 {
	p := 1.0
	for p > live.MinReportP && demand*p > live.ReactionBudget {
		p /= 2
	}
	return p
}

// ConsumeClaim sums one partition's reaction batches per (stream, second)
// and publishes each completed second as a partial count: a stream's taps
// are spread over 16 partitions, possibly on several routers, and the
// gateways merge the partials into one event per stream per second.
func (h reactionsHandler) ConsumeClaim(ctx context.Context, s eventlog.Session, c eventlog.Claim) error {
	r := h.r
	open := map[window]*sums{}
	// inForce is each stream's report probability as this partition last
	// computed it: a record claiming a lower p than half of it is scaled
	// as if it had that half (a client cannot inflate its taps by
	// claiming a p nobody asked for).
	inForce := map[snowflake.ID]float64{}
	next := c.InitialOffset()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	flush := func(now time.Time, all bool) {
		m := next
		for w, sm := range open {
			if !all && w.second >= now.Unix() {
				if sm.firstOffset < m {
					m = sm.firstOffset
				}
				continue
			}
			delete(open, w)
			if now.Sub(time.Unix(w.second, 0)) > staleReactions {
				continue
			}
			// The stream's demand from this partition's share of its 16
			// shards (viewers spread evenly over them).
			p := reportP(sm.demand * live.ReactionShards / float64(max(len(sm.shards), 1)))
			if p == 1 {
				delete(inForce, w.stream)
			} else {
				inForce[w.stream] = p
			}
			rx := &live.Reactions{Second: w.second, Counts: sm.counts}
			if p < 1 {
				rx.P = p
			}
			msg, err := live.EncodeBatch(live.Batch{StreamID: w.stream, Prev: -1, Reactions: rx})
			if err == nil {
				err = r.d.Relay.Publish(ctx, w.stream, msg)
			}
			if err != nil {
				r.m.publishErrors.Inc()
			}
		}
		s.Mark(c.Topic(), c.Partition(), m)
	}
	for {
		select {
		case rec, ok := <-c.Records():
			if !ok {
				flush(time.Now(), true)
				return nil
			}
			next = rec.Offset + 1
			rr, err := live.DecodeReactionRecord(rec.Value)
			if err != nil {
				r.m.invalid.Inc()
				continue
			}
			w := window{rr.StreamID, rr.Second}
			sm := open[w]
			if sm == nil {
				sm = &sums{counts: map[string]int64{}, firstOffset: rec.Offset, shards: map[string]bool{}}
				open[w] = sm
			}
			p := rr.P
			if p <= 0 {
				p = 1
			}
			if f, ok := inForce[rr.StreamID]; ok {
				p = max(p, f/2)
			} else {
				p = max(p, 0.5)
			}
			sm.demand += 1 / p
			sm.shards[string(rec.Key)] = true
			for k, n := range rr.Counts {
				sm.counts[k] += int64(math.Round(float64(n) / p))
			}
			r.m.reactions.Add(1)
		case now := <-tick.C:
			flush(now, false)
		}
	}
}
