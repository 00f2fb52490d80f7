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
// stream never puts a rest-tier comment there). Two things close that
// window: this process remembers the comments it accepted itself (the
// author deleting their own comment usually reaches the API that took
// it), and a comment accepted on another API instance is waited for,
// for as long as it is young enough that the archiver may still be
// behind (pendingFor), instead of answering 404 for a comment that
// exists.

// acceptedSize bounds the comments one API process remembers: at the
// seed's 5,000 comments/s on one process it is the last 6 s or so,
// longer than the archiver normally lags.
const acceptedSize = 1 << 15

// pendingFor is how long after its id was minted a comment missing from
// the store and the recent cache is waited for before the answer is 404.
const pendingFor = 10 * time.Second

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

// findComment looks a comment up in the store, then in the comments this
// process accepted, then in the recent cache; a comment young enough to
// be on its way to the store (pendingFor) is waited for.
func (a *API) findComment(ctx context.Context, s *live.Stream, id snowflake.ID) (live.Comment, error) {
	wait, waiting := 20*time.Millisecond, false
	defer func() {
		if waiting {
			a.m.takedownsWaiting.Dec()
		}
	}()
	for {
		c, err := a.lookComment(ctx, s, id)
		if !errors.Is(err, errUnknownComment) {
			return c, err
		}
		// Ids are minted at acceptance: one older than pendingFor that
		// nobody has is not coming (or never existed).
		// An id from the future (forged) waits no longer than a fresh one.
		left := min(time.Until(id.Time().Add(pendingFor)), pendingFor)
		if left <= 0 {
			return live.Comment{}, err
		}
		if !waiting {
			waiting = true
			a.m.takedownsWaiting.Inc()
		}
		select {
		case <-ctx.Done():
			return live.Comment{}, ctx.Err()
		case <-time.After(min(wait, left)):
		}
		wait = min(2*wait, 500*time.Millisecond)
	}
}

// lookComment is one pass of findComment.
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
