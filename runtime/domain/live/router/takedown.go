package router

import (
	"context"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live"
)

// A takedown the API appended unresolved (live.TakedownRequest: its
// comment was accepted moments ago on another API instance) reaches the
// router after its comment, on the same partition. The router remembers
// the comments of each partition it owns for indexKeep, by id, and
// resolves such a takedown against them before it enters the stream's
// pending events, so gateways, the recent cache and the sampler only
// ever see resolved retractions. The index also drops a second takedown
// of one comment (two moderators, the author and a report), which
// viewers would otherwise be sent twice.

// indexKeep is how long a partition's index keeps a comment: well past
// live.TakedownWindow, the age under which the API appends takedowns
// unresolved.
const indexKeep = 3 * live.TakedownWindow

// indexMax bounds one partition's index (30 s of the seed's 5,000
// comments/s flood fits).
const indexMax = 1 << 18

// commentRef is what resolving a takedown needs of a comment.
type commentRef struct {
	c         live.Comment // Seq set; Text dropped
	retracted bool
}

// commentIndex is one partition's recent comments by id, the oldest
// forgotten first. It is owned by the partition's goroutine.
type commentIndex struct {
	byID  map[snowflake.ID]*commentRef
	order []indexed // arrival order
}

type indexed struct {
	id snowflake.ID
	at time.Time
}

func newCommentIndex() *commentIndex {
	return &commentIndex{byID: map[snowflake.ID]*commentRef{}}
}

// add remembers the comment at seq, forgetting what is past indexKeep or
// indexMax.
func (x *commentIndex) add(c *live.Comment, seq int64, now time.Time) {
	ref := &commentRef{c: *c}
	ref.c.Seq, ref.c.Text = seq, ""
	x.byID[c.ID] = ref
	x.order = append(x.order, indexed{id: c.ID, at: now})
	n := 0
	for n < len(x.order) && (len(x.order)-n > indexMax || now.Sub(x.order[n].at) > indexKeep) {
		delete(x.byID, x.order[n].id)
		n++
	}
	if n > 0 {
		x.order = append(x.order[:0:0], x.order[n:]...)
	}
}

// resolve returns rt resolved against the comment it names, and whether
// it is to be published: false for a takedown that does not apply (not
// the author's, no such comment) or of a comment taken down already.
// A comment the index does not hold (the router took the partition over
// after it) is looked for in the recent cache, which holds every comment
// viewers were all shown; a rest-tier one of a sampled stream is not
// there, and its takedown then reaches the archiver only.
func (r *Router) resolve(ctx context.Context, x *commentIndex, stream snowflake.ID, rt *live.Retraction) (*live.Retraction, bool) {
	ref := x.byID[rt.CommentID]
	if ref == nil && rt.Request != nil {
		evs, err := r.d.Recent.Range(ctx, stream, -1, 0, live.RecentSize)
		if err != nil {
			r.log.Warn("recent cache unavailable; unresolved takedown left to the archiver", "stream", stream, "comment", rt.CommentID, "err", err)
		}
		for _, ev := range evs {
			if ev.Comment != nil && ev.Comment.ID == rt.CommentID {
				ref = &commentRef{c: *ev.Comment}
				x.byID[rt.CommentID] = ref
				break
			}
		}
	}
	if ref == nil {
		if rt.Request != nil {
			r.m.takedowns.WithLabelValues("unknown").Inc()
			return nil, false
		}
		// Resolved by whoever appended it: published as it is.
		r.m.takedowns.WithLabelValues("applied").Inc()
		return rt, true
	}
	if ref.c.StreamID != stream {
		r.m.takedowns.WithLabelValues("unknown").Inc()
		return nil, false
	}
	if ref.retracted {
		r.m.takedowns.WithLabelValues("duplicate").Inc()
		return nil, false
	}
	res, ok := rt.Resolve(ref.c)
	if !ok {
		r.m.takedowns.WithLabelValues("refused").Inc()
		return nil, false
	}
	ref.retracted = true
	r.m.takedowns.WithLabelValues("applied").Inc()
	return &res, true
}
