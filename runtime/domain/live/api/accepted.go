package api

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live"
)

// A takedown (DELETE, report, ban sweep) looks its comment up before it
// appends the retraction. A comment accepted a moment ago is only in the
// event log: the archiver has not written it to the store yet, the
// router may not have put it in the recent cache (and on a sampled
// stream never puts a rest-tier comment there). This process remembers
// the comments it accepted itself (the author deleting their own comment
// usually reaches the API that took it). A comment young enough to be on
// its way (pendingFor) that this process cannot find is not waited for:
// the takedown is appended unresolved (live.TakedownRequest) to the
// comment's partition, after the comment, and the router and the
// archiver resolve and apply it when they reach it in log order. Nothing
// waits on the store, and the answer does not depend on how far behind
// the archiver is.

// acceptedSize bounds the comments one API process remembers: at the
// seed's 5,000 comments/s on one process it is the last 6 s or so,
// longer than the archiver normally lags.
const acceptedSize = 1 << 15

// pendingFor is how long after its id was minted a comment missing from
// the store and the recent cache may still be on its way there: its
// takedown is appended unresolved, not answered 404.
const pendingFor = live.TakedownWindow

// acceptedIndex is the comments this process accepted lately, by id: a
// ring, the oldest forgotten first.
type acceptedIndex struct {
	mu   sync.Mutex
	byID map[snowflake.ID]live.Comment
	ring []snowflake.ID
	next int
}

func newAcceptedIndex(size int) *acceptedIndex {
	return &acceptedIndex{byID: make(map[snowflake.ID]live.Comment, size), ring: make([]snowflake.ID, size)}
}

// add remembers c (with its seq), forgetting the oldest past the bound.
func (x *acceptedIndex) add(c live.Comment) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if old := x.ring[x.next]; old != 0 {
		delete(x.byID, old)
	}
	x.ring[x.next] = c.ID
	x.next = (x.next + 1) % len(x.ring)
	x.byID[c.ID] = c
}

// get returns the comment of id in stream, if remembered.
func (x *acceptedIndex) get(stream, id snowflake.ID) (live.Comment, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	c, ok := x.byID[id]
	return c, ok && c.StreamID == stream
}

// retracted marks a remembered comment taken down, so a second takedown
// answers as the store would.
func (x *acceptedIndex) retracted(id snowflake.ID, reason string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if c, ok := x.byID[id]; ok {
		c.Retracted, c.Reason = true, reason
		x.byID[id] = c
	}
}

// errPendingComment is findComment's answer for a comment it cannot
// find whose id is young enough (pendingFor) that it may be only in the
// log: the caller appends its takedown unresolved.
var errPendingComment = errors.New("live api: comment not readable yet")

// findComment looks a comment up in the store, then in the comments this
// process accepted, then in the recent cache, once: a comment none of
// them has is errPendingComment while its id is under pendingFor old,
// errUnknownComment after.
func (a *API) findComment(ctx context.Context, s *live.Stream, id snowflake.ID) (live.Comment, error) {
	c, err := a.lookComment(ctx, s, id)
	if !errors.Is(err, errUnknownComment) {
		return c, err
	}
	// Ids are minted at acceptance: one older than pendingFor that
	// nobody has is not coming (or never existed). An id from the future
	// (forged) counts as fresh: its takedown is appended and, naming no
	// comment, resolves to nothing.
	if time.Until(id.Time().Add(pendingFor)) > 0 {
		return live.Comment{}, errPendingComment
	}
	return live.Comment{}, err
}

// requestTakedown appends the takedown of a comment findComment could not
// read yet (errPendingComment), for the router and the archiver to
// resolve in log order: it applies if by wrote the comment or any is
// set. The caller cannot learn which; the answer is the contract's 204
// either way, as for a comment already taken down.
func (a *API) requestTakedown(ctx context.Context, s *live.Stream, id snowflake.ID, reason string, by snowflake.ID, any bool) error {
	lr := live.LogRecord{Kind: live.KindRetract, StreamID: s.ID, AcceptedAt: a.now().UnixNano(),
		Retract: &live.Retraction{CommentID: id, Reason: reason, Request: &live.TakedownRequest{By: by, Any: any}}}
	if _, err := a.appendRecords(ctx, s, lr); err != nil {
		return err
	}
	a.m.takedownsDeferred.Inc()
	return nil
}

// lookComment looks a comment up where the API can read it.
func (a *API) lookComment(ctx context.Context, s *live.Stream, id snowflake.ID) (live.Comment, error) {
	c, err := a.d.Store.GetComment(ctx, s.ID, id)
	if err == nil {
		return c, nil
	}
	if !errors.Is(err, live.ErrNotFound) {
		return live.Comment{}, err
	}
	if c, ok := a.accepted.get(s.ID, id); ok {
		return c, nil
	}
	evs, err := a.d.Recent.Range(ctx, s.ID, -1, 0, live.RecentSize)
	if err != nil {
		return live.Comment{}, err
	}
	for _, ev := range evs {
		if ev.Comment != nil && ev.Comment.ID == id {
			return *ev.Comment, nil
		}
	}
	return live.Comment{}, errUnknownComment
}
