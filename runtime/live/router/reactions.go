package router

import (
	"context"
	"time"

	"github.com/concord-chat/concord/runtime/eventlog"
	"github.com/concord-chat/concord/runtime/live"
	"github.com/concord-chat/concord/runtime/snowflake"
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
}

// ConsumeClaim sums one partition's reaction batches per (stream, second)
// and publishes each completed second as a partial count: a stream's taps
// are spread over 16 partitions, possibly on several routers, and the
// gateways merge the partials into one event per stream per second.
func (h reactionsHandler) ConsumeClaim(ctx context.Context, s eventlog.Session, c eventlog.Claim) error {
	r := h.r
	open := map[window]*sums{}
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
			msg, err := live.EncodeBatch(live.Batch{StreamID: w.stream, Prev: -1, Reactions: &live.Reactions{Second: w.second, Counts: sm.counts}})
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
				sm = &sums{counts: map[string]int64{}, firstOffset: rec.Offset}
				open[w] = sm
			}
			for k, n := range rr.Counts {
				sm.counts[k] += n
			}
		case now := <-tick.C:
			flush(now, false)
		}
	}
}
