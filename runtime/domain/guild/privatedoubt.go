package guild

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// Private channels keep the guild channels' write order: one write of a
// channel at a time, its id minted when its turn comes, so that writes
// become visible in id order (a reader paging with after= past a newer
// message would never see an older one committed after it), and a write
// in doubt is completed before the channel's next write, as commitWrites
// does for a guild (see there and doubtledger.go). The private router
// serves every private channel of the process from one goroutine, which
// must not wait for the store; the order is kept per channel instead, by
// channelLocks, outside it.

// channelLocks serialises the writes of each private channel.
type channelLocks struct {
	mu sync.Mutex
	m  map[snowflake.ID]*channelLock
}

type channelLock struct {
	sem   chan struct{}
	users int
}

// lock waits for channel's turn until ctx ends; unlock ends it.
func (l *channelLocks) lock(ctx context.Context, channel snowflake.ID) (unlock func(), err error) {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[snowflake.ID]*channelLock{}
	}
	c := l.m[channel]
	if c == nil {
		c = &channelLock{sem: make(chan struct{}, 1)}
		l.m[channel] = c
	}
	c.users++
	l.mu.Unlock()
	release := func() {
		l.mu.Lock()
		c.users--
		if c.users == 0 {
			delete(l.m, channel)
		}
		l.mu.Unlock()
	}
	select {
	case c.sem <- struct{}{}:
		return func() { <-c.sem; release() }, nil
	case <-ctx.Done():
		release()
		return nil, fmt.Errorf("private channel %d: %w: waiting for its earlier writes: %w", channel, ErrUnavailable, ctx.Err())
	}
}

// settle completes channel's write in doubt, this node's or one the
// ledger holds (another node's, or this node's before a restart), before
// a write of the channel goes on; the caller holds the channel's lock. In
// a cluster (Config.Owns set) the ledger is read before every write:
// nothing tells a node that the channel was served elsewhere meanwhile.
// Alone, once per channel.
func (p *privateRouter) settle(ctx context.Context, channel snowflake.ID) error {
	held := p.svc.doubt.get(0, channel)
	w := held
	_, read := p.ledgerRead.Load(channel)
	if p.svc.cfg.Owns != nil || !read {
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ledgerTimeout)
		recs, err := p.svc.doubts(lctx, channel)
		cancel()
		if err != nil {
			return fmt.Errorf("private channel %d: writes in doubt: %w", channel, err)
		}
		p.ledgerRead.Store(channel, true)
		if held != nil && len(recs) == 1 && recs[0].Message.ID == held.messageID {
			recs = nil // the ledger holds just this node's write
		}
		if len(recs) > 0 {
			if held != nil && slices.ContainsFunc(recs, func(r doubtRecord) bool { return r.Message.ID == held.messageID }) {
				held = nil
			}
			w = p.svc.recovered(channel, channel, recs, held, p.publishRecord)
			w.messageID = recs[len(recs)-1].Message.ID
			p.svc.doubt.put(0, channel, w)
			p.settleLater(channel, w, 0)
			p.svc.log.Info("private message writes in doubt found in the ledger; completed before the channel's next write",
				"channel_id", channel, "writes", len(recs))
		}
	}
	if w == nil {
		return nil
	}
	if err := w.retry(); err != nil {
		if !w.recorded && w.describe != nil {
			p.svc.record(channel, []*batchedWrite{w}, []doubtRecord{w.describe(nil, ctx)})
		}
		return inDoubtError(channel, err)
	}
	p.svc.doubt.drop(0, channel, w)
	lctx, cancel := writeContext(ctx)
	defer cancel()
	if err := w.late(nil, lctx); err != nil {
		p.svc.log.Warn("private message write completed after it was answered as failed; not fanned out", "channel_id", channel, "err", err)
	} else {
		p.svc.log.Info("private message write completed after it was answered as failed", "channel_id", channel)
	}
	return nil
}

// hold keeps m, whose write fell in doubt, as its channel's write in
// doubt: recorded in the ledger, completed before the channel's next
// write or in the background.
func (p *privateRouter) hold(ctx context.Context, typ string, m store.Message, c store.Channel,
	render func(context.Context, Written) (wire.Message, error)) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ledgerTimeout)
	wm, err := render(rctx, Written{Message: m, Channel: c})
	cancel()
	rec := newDoubtRecord(typ, m, wm, err)
	w := p.svc.recovered(m.ChannelID, m.ChannelID, []doubtRecord{rec}, nil, p.publishRecord)
	w.messageID, w.forget = m.ID, nil
	w.describe = func(*Actor, context.Context) doubtRecord { return rec }
	p.svc.record(m.ChannelID, []*batchedWrite{w}, []doubtRecord{rec})
	p.svc.doubt.put(0, m.ChannelID, w)
	p.settleLater(m.ChannelID, w, 0)
}

// settleLater is Service.settleLater for a private channel.
func (p *privateRouter) settleLater(channel snowflake.ID, w *batchedWrite, attempt int) {
	pause := min(time.Second<<min(attempt, 5), 30*time.Second)
	time.AfterFunc(pause, func() {
		if p.svc.doubt.get(0, channel) != w {
			return
		}
		if own := p.svc.cfg.Owns; own != nil && !own(channel) {
			p.svc.doubt.drop(0, channel, w)
			p.svc.log.Warn("private message write in doubt handed to the channel's next node", "channel_id", channel,
				"recorded", w.recorded)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*writeTimeout)
		defer cancel()
		unlock, err := p.writes.lock(ctx, channel)
		if err == nil {
			err = p.settle(ctx, channel)
			unlock()
		}
		switch {
		case err == nil:
		case errors.Is(err, ErrUnavailable) && p.svc.doubt.get(0, channel) == w:
			p.settleLater(channel, w, attempt+1)
		case errors.Is(err, ErrUnavailable):
		default:
			p.svc.log.Warn("private message write in doubt not settled", "channel_id", channel, "err", err)
		}
	})
}

// publishRecord fans out a completed write of the ledger.
func (p *privateRouter) publishRecord(ctx context.Context, r doubtRecord) error {
	if len(r.Wire) == 0 {
		return fmt.Errorf("message %d: no payload recorded", r.Message.ID)
	}
	var wm wire.Message
	if err := json.Unmarshal(r.Wire, &wm); err != nil {
		return fmt.Errorf("message %d: %w", r.Message.ID, err)
	}
	return p.publishMessage(ctx, r.Type, wm)
}
