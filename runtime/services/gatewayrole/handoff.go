package gatewayrole

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/edge/gateway"
)

// The session hand-off of a draining gateway node of `concord serve`
// (gateway.HandoffBackend): the guild owners move each session's
// subscriptions to the successor node, which adopts them.

var _ gateway.HandoffBackend = (*ringBackend)(nil)

// handoffState is what a draining gateway's backend hands the successor's
// (gateway.HandoffBackend's state): the guilds whose subscription moved,
// and those that did not (their owner was unreachable or the move was
// refused), which the successor subscribes again.
type handoffState struct {
	Moved  []snowflake.ID `json:"moved"`
	Failed []snowflake.ID `json:"failed"`
}

// MoveSession implements gateway.HandoffBackend: it asks the owner of
// each of the session's guilds to move the subscription to node to
// (GuildNode.MoveSession); each owner's actor sends this
// node its markers through the Deliver stream. A guild whose move fails
// is listed in the state for the successor to subscribe again.
func (b *ringBackend) MoveSession(ctx context.Context, s event.Session, to, moveID string) (int, json.RawMessage, error) {
	b.mu.Lock()
	guilds := slices.Clone(b.bySess[s.ID])
	ok := make(map[snowflake.ID]bool, len(guilds))
	for _, g := range guilds {
		if sub := b.byGuild[g][s.ID]; sub != nil {
			ok[g] = sub.ok
		}
	}
	b.mu.Unlock()
	mv := guild.Move{Session: s.ID, To: to, ID: moveID}
	var (
		mu      sync.Mutex
		markers int
		st      = handoffState{Moved: []snowflake.ID{}, Failed: []snowflake.ID{}}
		errs    []error
		wg      sync.WaitGroup
	)
	sem := make(chan struct{}, subscribeParallel)
	for _, g := range guilds {
		if !ok[g] {
			st.Failed = append(st.Failed, g)
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			cctx, cancel := context.WithTimeout(ctx, b.timeout)
			n, err := b.guilds.MoveSession(cctx, g, mv)
			cancel()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				st.Failed = append(st.Failed, g)
				errs = append(errs, fmt.Errorf("guild %d: %w", g, err))
				return
			}
			markers += n
			st.Moved = append(st.Moved, g)
		}()
	}
	wg.Wait()
	out, err := json.Marshal(st)
	if err != nil {
		return markers, nil, fmt.Errorf("gateway: move session: %w", err)
	}
	return markers, out, errors.Join(errs...)
}

// ReleaseSession implements gateway.HandoffBackend: the session lives on
// the successor, so its subscriptions are forgotten here, not detached.
func (b *ringBackend) ReleaseSession(ctx context.Context, s event.Session) {
	b.users.remove(s.ID)
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, g := range b.bySess[s.ID] {
		b.removeLocked(g, s.ID)
	}
	delete(b.bySess, s.ID)
	b.released[s.ID] = true
}

// AdoptSession implements gateway.HandoffBackend: it records the moved
// guilds as subscribed and the failed ones as to be subscribed, which the
// retry loop (follow) does within RetryInterval.
func (b *ringBackend) AdoptSession(ctx context.Context, s event.Session, state json.RawMessage) error {
	var st handoffState
	if len(state) > 0 {
		if err := json.Unmarshal(state, &st); err != nil {
			return fmt.Errorf("gateway: adopt session %s: %w", s.ID, err)
		}
	}
	b.users.put(s)
	b.mu.Lock()
	defer b.mu.Unlock()
	// A session this node gave away may come back (a takeover the
	// other way).
	delete(b.released, s.ID)
	guilds := make([]snowflake.ID, 0, len(st.Moved)+len(st.Failed))
	for i, list := range [][]snowflake.ID{st.Moved, st.Failed} {
		for _, g := range list {
			if b.byGuild[g] == nil {
				b.byGuild[g] = make(map[event.SessionID]*subscription)
			}
			// The moved ones are attached on their owners: a later
			// ring move resubscribes them flagged as moved.
			b.byGuild[g][s.ID] = &subscription{s: s, ok: i == 0, attached: i == 0}
			guilds = append(guilds, g)
		}
	}
	b.bySess[s.ID] = guilds
	return nil
}
