package entitlement

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/concord-chat/concord/runtime/adapters/registry"
)

// Notice is what a Bus watch delivers.
type Notice struct {
	// Snapshot means Revocations holds the latest revocation of every bot
	// that has one: sent first and after every Lost. A reader compares
	// the ids with those it applied to find what it missed.
	Snapshot bool
	// Lost means pushes cannot be received for now; new identifies are
	// refused until the next Snapshot.
	Lost bool
	// Revocations are new pushes in publication order (or the listing of
	// a Snapshot).
	Revocations []Revocation
}

// Bus carries revocation pushes to every gateway node.
//
// Publish is at-most-once from the reader's point of view: a push can be
// lost (a node's watch was down, the write failed); the lease bounds what
// that costs. Watch delivers a Snapshot first, then pushes in order, Lost
// when it cannot follow and a Snapshot again when it can. The channel is
// closed when ctx ends or the Bus closes.
type Bus interface {
	Publish(ctx context.Context, r Revocation) error
	Watch(ctx context.Context) (<-chan Notice, error)
}

// NewID returns a random revocation id.
func NewID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// DefaultPrefix is the registry key prefix of revocations.
const DefaultPrefix = "revocations/"

// watchableRegistry is a Registry that can follow its kv space.
type watchableRegistry interface {
	registry.Registry
	registry.KVWatcher
}

// RegistryBus publishes each revocation as the registry key
// <prefix><bot user id> (the latest revocation of a bot; one small key per
// bot ever revoked) and watches the prefix.
type RegistryBus struct {
	reg    watchableRegistry
	prefix string
}

var _ Bus = (*RegistryBus)(nil)

// NewRegistryBus returns a Bus over reg, which must implement
// registry.KVWatcher (registry/etcd does). prefix defaults to
// DefaultPrefix.
func NewRegistryBus(reg registry.Registry, prefix string) (*RegistryBus, error) {
	w, ok := reg.(watchableRegistry)
	if !ok {
		return nil, fmt.Errorf("%w: registry %T cannot watch its kv space", ErrConfig, reg)
	}
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return &RegistryBus{reg: w, prefix: prefix}, nil
}

// Publish implements Bus.
func (b *RegistryBus) Publish(ctx context.Context, r Revocation) error {
	if r.BotUserID == 0 {
		return fmt.Errorf("%w: revocation without a bot user", ErrConfig)
	}
	if r.ID == "" {
		r.ID = NewID()
	}
	v, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("entitlement: encode revocation: %w", err)
	}
	if err := b.reg.Put(ctx, b.prefix+r.BotUserID.String(), v, registry.Persistent); err != nil {
		return fmt.Errorf("entitlement: publish revocation of %d: %w", r.BotUserID, err)
	}
	return nil
}

// Watch implements Bus. Undecodable values are skipped.
func (b *RegistryBus) Watch(ctx context.Context) (<-chan Notice, error) {
	in, err := b.reg.WatchKV(ctx, b.prefix)
	if err != nil {
		return nil, fmt.Errorf("entitlement: watch revocations: %w", err)
	}
	out := make(chan Notice, 16)
	go func() {
		defer close(out)
		for u := range in {
			n := Notice{Snapshot: u.Snapshot, Lost: u.Lost}
			for _, c := range u.Changes {
				if c.Deleted {
					continue
				}
				var r Revocation
				if err := json.Unmarshal(c.Value, &r); err != nil || r.BotUserID == 0 {
					continue
				}
				n.Revocations = append(n.Revocations, r)
			}
			if !n.Snapshot && !n.Lost && len(n.Revocations) == 0 {
				continue
			}
			select {
			case out <- n:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}
