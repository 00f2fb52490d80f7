package readstaterole

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/readstate"
	"github.com/concord-chat/concord/runtime/services/transport"
	"github.com/concord-chat/concord/runtime/services/wiring"
)

// Read states are sharded by user on a consistent-hash ring over the live
// read-state nodes (a registry.LocalRing over the role, the same ring
// code guild placement uses). A user's owner holds the user's records:
// every ack, every READY read_state and every mention count of the user
// runs there. The mention consumer stays partitioned by channel (one
// consumer group over the messages topic); it hands each user mention to
// the user's owner (readstate.Mentions), which writes it through before
// answering, so the consumer marks an offset only once every mention
// below it is durable on its owner. Redeliveries after a rebalance or a
// node's death carry the same (user, channel, offset) and are skipped by
// the owner's record, wherever the user lives by then.

// Backend is the read-state seam of a process, what every other role
// (the API's acks, identify's READY read_state, the mention hand-off)
// calls: the call for a user runs in-process when this process's role
// owns the user — always in `concord dev`, which has no ring — and over
// ReadStateNode on the owner otherwise (the client routes by the same
// ring).
type Backend struct {
	self   string              // this process's node name
	ring   *registry.LocalRing // over the role; nil in `concord dev`
	local  *readstate.Service  // nil until the role is built here
	remote transport.ReadStateClient
}

var _ transport.ReadStateBackend = (*Backend)(nil)

// Open returns the process's Backend, opening it on first use: with
// sharded (the users are sharded on a ring over the live read-state
// nodes) the read-state ring and its client; else every user's owner is
// this process's role. The process gives it as wiring.ReadStates; the
// role, where it runs, sets its service in it.
func Open(ctx context.Context, p wiring.Parts, sharded bool) (*Backend, error) {
	return wiring.Shared(p.Seams, backendKey, func() (*Backend, func() error, error) {
		if !sharded {
			return &Backend{self: p.Config.Node}, nil, nil
		}
		ring, err := wiring.Ring(ctx, p.Seams, p.Registry, Name, registry.LocalRingConfig{Logger: p.Logger.With("component", "ring")})
		if err != nil {
			return nil, nil, err
		}
		c := transport.NewReadStateClient(p.ClientConfig, ring)
		return &Backend{self: p.Config.Node, ring: ring, remote: c}, c.Close, nil
	})
}

// Local is the process's read-state service (nil when the role runs
// elsewhere).
func (s *Backend) Local() *readstate.Service { return s.local }

// isLocal reports whether the user's owner is this process's service.
func (s *Backend) isLocal(user snowflake.ID) bool {
	if s.local == nil {
		return false
	}
	if s.ring == nil {
		return true
	}
	n, ok := s.ring.Owner(user)
	return ok && n.Name == s.self
}

// errNoReadStates answers in a process that neither runs the role nor
// reaches one (`concord dev` before the role is built).
var errNoReadStates = errors.New("readstate: no read-state role in this process")

// Ack implements transport.ReadStateBackend. A local service that finds
// the user claimed by another owner (the ring moved since isLocal) hands
// the ack to the owner the ring names now.
func (s *Backend) Ack(ctx context.Context, user, channel, message snowflake.ID) (readstate.MessageAck, error) {
	switch {
	case s.isLocal(user):
		ack, err := s.local.Ack(ctx, user, channel, message)
		if !errors.Is(err, readstate.ErrNotOwner) || s.remote == nil || s.isLocal(user) {
			return ack, err
		}
	case s.remote == nil:
		return readstate.MessageAck{}, errNoReadStates
	}
	return s.remote.Ack(ctx, user, channel, message)
}

// ringEpoch is a read-state service's Config.Owns on a ring: the node
// owns the users its view of the ring gives it, under that view's
// registry revision, so a later view's owner claims them at a higher
// epoch than any earlier owner held them at.
func ringEpoch(ring *registry.LocalRing, self string) func(snowflake.ID) (int64, bool) {
	return func(user snowflake.ID) (int64, bool) {
		v := ring.View()
		n, ok := v.Owner(user)
		if !ok || n.Name != self {
			return 0, false
		}
		return v.Revision, true
	}
}

// ownerErr turns the service's ErrNotOwner (the user moved, or a later
// owner claimed the user's records in the store) into the transport's,
// which a caller retries on the ring's owner.
func ownerErr(err error) error {
	if errors.Is(err, readstate.ErrNotOwner) {
		return fmt.Errorf("%w: %v", transport.ErrNotOwner, err)
	}
	return err
}

// States implements transport.ReadStateBackend. Like Ack, a local
// service that finds the user claimed by another owner hands the read to
// the owner the ring names now.
func (s *Backend) States(ctx context.Context, user snowflake.ID, channels []snowflake.ID) ([]readstate.State, error) {
	switch {
	case s.isLocal(user):
		st, err := s.local.States(ctx, user, channels)
		if !errors.Is(err, readstate.ErrNotOwner) || s.remote == nil || s.isLocal(user) {
			return st, err
		}
	case s.remote == nil:
		return nil, errNoReadStates
	}
	return s.remote.States(ctx, user, channels)
}

// AddMentions implements transport.ReadStateBackend: the mentions of
// local users are counted here, the others go to their owners.
func (s *Backend) AddMentions(ctx context.Context, ms []readstate.Mention) error {
	var local, remote []readstate.Mention
	for _, m := range ms {
		if s.isLocal(m.User) {
			local = append(local, m)
		} else {
			remote = append(remote, m)
		}
	}
	var errs []error
	if len(local) > 0 {
		errs = append(errs, s.local.AddMentions(ctx, local))
	}
	if len(remote) > 0 {
		if s.remote == nil {
			return errNoReadStates
		}
		errs = append(errs, s.remote.AddMentions(ctx, remote))
	}
	return errors.Join(errs...)
}

// ownedReadStates is what a read-state node serves over ReadStateNode:
// its service, refusing users the node does not own on its ring with
// transport.ErrNotOwner, so a caller whose ring is behind retries on the
// owner and no two nodes change one user's records.
type ownedReadStates struct {
	self string
	ring *registry.LocalRing
	svc  *readstate.Service
}

var _ transport.ReadStateBackend = ownedReadStates{}

func (o ownedReadStates) check(user snowflake.ID) error {
	if n, ok := o.ring.Owner(user); !ok || n.Name != o.self {
		return fmt.Errorf("%w: read states of user %d", transport.ErrNotOwner, user)
	}
	return nil
}

// Ack implements transport.ReadStateBackend.
func (o ownedReadStates) Ack(ctx context.Context, user, channel, message snowflake.ID) (readstate.MessageAck, error) {
	if err := o.check(user); err != nil {
		return readstate.MessageAck{}, err
	}
	ack, err := o.svc.Ack(ctx, user, channel, message)
	return ack, ownerErr(err)
}

// States implements transport.ReadStateBackend.
func (o ownedReadStates) States(ctx context.Context, user snowflake.ID, channels []snowflake.ID) ([]readstate.State, error) {
	if err := o.check(user); err != nil {
		return nil, err
	}
	st, err := o.svc.States(ctx, user, channels)
	return st, ownerErr(err)
}

// AddMentions implements transport.ReadStateBackend: all or nothing, so
// the caller retries the whole hand-off on the owners of its ring.
func (o ownedReadStates) AddMentions(ctx context.Context, ms []readstate.Mention) error {
	for _, m := range ms {
		if err := o.check(m.User); err != nil {
			return err
		}
	}
	return ownerErr(o.svc.AddMentions(ctx, ms))
}

// mentionRouter is the mention consumer's readstate.Mentions on a
// read-state node of a cluster: it hands mentions to their owners and
// retries until every one is durable or the consumer's claim ends. An
// owner that died stays on the ring until its registry lease lapses; the
// retries then reach the new owner, which loads the user from the store
// and skips what the dead owner had already written.
type mentionRouter struct {
	shards *Backend
	retry  time.Duration
	log    *slog.Logger
}

// AddMentions implements readstate.Mentions.
func (r *mentionRouter) AddMentions(ctx context.Context, ms []readstate.Mention) error {
	for attempt := 1; ; attempt++ {
		err := r.shards.AddMentions(ctx, ms)
		if err == nil {
			return nil
		}
		// Everything else passes: an owner that is down, stopping or
		// not yet the ring's owner, a store that is down.
		if ctx.Err() != nil || errors.Is(err, transport.ErrInvalid) {
			return err
		}
		if attempt == 1 || attempt%20 == 0 {
			r.log.Warn("mention hand-off failed; retrying", "mentions", len(ms), "attempt", attempt, "err", err)
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(r.retry):
		}
	}
}
