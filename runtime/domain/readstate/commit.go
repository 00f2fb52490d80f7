package readstate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Every change a caller is answered for — an ack, a mention counted or
// lowered — is in the store before the call returns, so it survives
// kill -9 of the node (the periodic Flush is left with channel records
// and the offsets it marks). Writes are group-committed: the changes that
// arrive while one store write runs wait for it and then go out together
// in the next one, so under load one synced write carries many acks.
//
// All writes run under flushMu: the copy a write takes of a record is the
// newest when it is taken, so two writes never reorder two copies of one
// record.

// recKey names one user's record in one channel.
type recKey struct{ user, channel snowflake.ID }

// commitBatch is one group commit: the records of every call that joined
// it before its leader took it.
type commitBatch struct {
	keys    map[recKey]struct{}
	done    chan struct{} // closed once written
	promote chan struct{} // closed when the previous batch is written: lead this one
	err     error
	fenced  map[snowflake.ID]bool
}

// committer holds the batch open for joining, and whether a batch is
// being written (then the open one waits for it).
type committer struct {
	mu      sync.Mutex
	open    *commitBatch
	writing bool
}

// errFencedWrite wraps ErrNotOwner when a user's write was refused by the
// store because another owner claimed the user since this service did;
// the caller's change is gone with the dropped cache entry, and the call
// is worth one retry (it claims at the current epoch and reloads).
var errFencedWrite = fmt.Errorf("%w: fenced in the store by a later owner", ErrNotOwner)

// commit makes the current copies of keys durable. It joins the open
// batch; with no write running, the caller leads the batch at once;
// otherwise the batch waits for the running write, and then the first of
// its callers to wake leads it. A leader writes the records still dirty
// (a clean one is durable already) and hands on to the batch that opened
// meanwhile.
func (s *Service) commit(ctx context.Context, keys []recKey) error {
	if len(keys) == 0 {
		return nil
	}
	s.gc.mu.Lock()
	b := s.gc.open
	if b == nil {
		b = &commitBatch{keys: map[recKey]struct{}{}, done: make(chan struct{}), promote: make(chan struct{})}
		s.gc.open = b
	}
	for _, k := range keys {
		b.keys[k] = struct{}{}
	}
	lead := !s.gc.writing
	if lead {
		s.gc.writing = true
		s.gc.open = nil
	}
	s.gc.mu.Unlock()
	if !lead {
		select {
		case <-b.done:
		case <-b.promote:
			s.gc.mu.Lock()
			lead = s.gc.open == b
			if lead {
				s.gc.open = nil
			}
			s.gc.mu.Unlock()
		}
	}
	if lead {
		s.lead(ctx, b)
	}
	<-b.done
	for _, k := range keys {
		if b.fenced[k.user] {
			return fmt.Errorf("%w: user %d", errFencedWrite, k.user)
		}
	}
	return b.err
}

// lead writes batch b and promotes the batch that opened meanwhile.
func (s *Service) lead(ctx context.Context, b *commitBatch) {
	s.flushMu.Lock()
	// One caller's cancellation must not fail the others' writes; the
	// store bounds each request.
	b.fenced, b.err = s.writeKeysLocked(context.WithoutCancel(ctx), b.keys)
	s.flushMu.Unlock()
	close(b.done)
	s.gc.mu.Lock()
	if next := s.gc.open; next != nil {
		close(next.promote) // writing stays true: its first waiter leads it
	} else {
		s.gc.writing = false
	}
	s.gc.mu.Unlock()
}

// writeKeysLocked writes the dirty records among keys. flushMu is held.
func (s *Service) writeKeysLocked(ctx context.Context, keys map[recKey]struct{}) (map[snowflake.ID]bool, error) {
	s.beginWrite()
	defer s.endWrite()
	recs := make([]Record, 0, len(keys))
	for k := range keys {
		// Not cached means evicted, and only clean entries are evicted;
		// with flushMu held no write is in flight, so it is in the store.
		s.users.peek(k.user, func(e *userEntry) {
			if !e.dirty[k.channel] {
				return
			}
			r := e.take(k.channel)
			recs = append(recs, r)
			s.trackUser(e.user, r)
		})
	}
	s.m.commits.Inc()
	return s.writeLocked(ctx, recs, nil)
}

// take returns a copy of the record of channel to write, under the epoch
// the entry holds, and marks it clean.
func (e *userEntry) take(channel snowflake.ID) Record {
	r := *e.recs[channel]
	r.Mentions = slices.Clone(r.Mentions)
	r.Epoch = e.epoch
	delete(e.dirty, channel)
	return r
}

// beginWrite starts recording what a write carries (flushMu held), so
// that an entry evicted clean and reloaded meanwhile is reloaded with it.
func (s *Service) beginWrite() {
	s.inflightMu.Lock()
	s.inflightUsers = map[snowflake.ID][]Record{}
	s.inflightChans = map[snowflake.ID]ChannelRecord{}
	s.inflightMu.Unlock()
}

func (s *Service) endWrite() {
	s.inflightMu.Lock()
	s.inflightUsers, s.inflightChans = nil, nil
	s.inflightMu.Unlock()
}

func (s *Service) trackUser(user snowflake.ID, r Record) {
	s.inflightMu.Lock()
	s.inflightUsers[user] = append(s.inflightUsers[user], r)
	s.inflightMu.Unlock()
}

// writeLocked writes records taken from the cache (flushMu held). Users
// the store fenced are forgotten and returned: what this service held of
// them is older than what their new owner wrote. Any other failure marks
// everything dirty again for the next write.
func (s *Service) writeLocked(ctx context.Context, recs []Record, chans []ChannelRecord) (map[snowflake.ID]bool, error) {
	if len(recs)+len(chans) == 0 {
		return nil, nil
	}
	start := time.Now()
	err := s.store.Write(ctx, recs, chans)
	var fe *FencedError
	if err != nil && !errors.As(err, &fe) {
		s.redirty(recs, chans)
		return nil, fmt.Errorf("%w: write %d records: %v", ErrStore, len(recs)+len(chans), err)
	}
	s.m.flushSeconds.Observe(time.Since(start).Seconds())
	var fenced map[snowflake.ID]bool
	if fe != nil {
		// The epoch each user's copies were written at (one per user: they
		// come from one entry). A fenced user's entry is forgotten only if
		// it still holds the user there: evicted while this write ran and
		// reloaded under a later claim, it holds what the store has now,
		// and maybe a change waiting to be written.
		at := make(map[snowflake.ID]int64, len(recs))
		for _, r := range recs {
			at[r.UserID] = r.Epoch
		}
		fenced = make(map[snowflake.ID]bool, len(fe.Users))
		for _, u := range fe.Users {
			fenced[u] = true
			s.inflightMu.Lock()
			delete(s.inflightUsers, u)
			s.inflightMu.Unlock()
			s.users.dropIf(u, func(e *userEntry) bool { return e.epoch == at[u] })
		}
		s.m.fenced.Add(float64(len(fe.Users)))
		s.cfg.Logger.Warn("readstate: writes fenced by a later owner; their users are forgotten", "users", len(fe.Users))
	}
	n := len(chans)
	for _, r := range recs {
		if !fenced[r.UserID] {
			n++
		}
	}
	s.m.written.Add(float64(n))
	s.m.nWritten.Add(int64(n))
	return fenced, nil
}

// mutate runs fn on user's entry for a change: the service must own the
// user (Config.Owns) and hold the user's records at that epoch in the
// store, claiming them first when it does not (a miss, an entry loaded
// by a read, a new ring revision). When the claim shows that another
// owner held them since this entry was loaded, the entry is reloaded.
func (s *Service) mutate(ctx context.Context, user snowflake.ID, fn func(*userEntry)) error {
	epoch, ok := s.owns(user)
	if !ok {
		return fmt.Errorf("%w: user %d", ErrNotOwner, user)
	}
	return s.users.doErr(ctx, user, s.claimLoad(user, epoch), func(e *userEntry) error {
		if e.epoch != epoch {
			prev, err := s.claim(ctx, user, epoch)
			if err != nil {
				return err
			}
			if prev != e.epoch {
				fresh, err := s.loadUser(user)(ctx)
				if err != nil {
					return err
				}
				*e = *fresh
			}
			e.epoch = epoch
		}
		fn(e)
		return nil
	})
}

// owns is Config.Owns, or epoch 0 for every user without one.
func (s *Service) owns(user snowflake.ID) (int64, bool) {
	if s.cfg.Owns == nil {
		return 0, true
	}
	epoch, ok := s.cfg.Owns(user)
	return max(epoch, 1), ok
}

// claim holds user's records at epoch in the store; epoch 0 (no
// ownership) claims nothing.
func (s *Service) claim(ctx context.Context, user snowflake.ID, epoch int64) (int64, error) {
	if epoch == 0 {
		return 0, nil
	}
	prev, err := s.store.Claim(ctx, user, epoch)
	switch {
	case errors.Is(err, ErrFenced):
		return 0, fmt.Errorf("%w: user %d is held at a later epoch than %d", ErrNotOwner, user, epoch)
	case err != nil:
		return 0, fmt.Errorf("%w: claim user %d: %v", ErrStore, user, err)
	}
	s.m.claims.Inc()
	return prev, nil
}

// claimLoad loads a user missing from the cache for a change: claim, then
// load, so that no write of an earlier owner lands after the load.
func (s *Service) claimLoad(user snowflake.ID, epoch int64) func(context.Context) (*userEntry, error) {
	return func(ctx context.Context) (*userEntry, error) {
		if _, err := s.claim(ctx, user, epoch); err != nil {
			return nil, err
		}
		e, err := s.loadUser(user)(ctx)
		if err != nil {
			return nil, err
		}
		e.epoch = epoch
		return e, nil
	}
}
