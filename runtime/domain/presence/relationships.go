package presence

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Relationships answers who a user's friends are: their sessions receive
// the user's presence directly, outside any guild.
type Relationships interface {
	Friends(ctx context.Context, userID snowflake.ID) ([]snowflake.ID, error)
}

// FriendStore persists friendships. Friendships are symmetric; an adapter
// stores each pair once or twice as it likes. Errors are returned as they
// are and wrapped by the caller.
type FriendStore interface {
	LoadFriends(ctx context.Context, userID snowflake.ID) ([]snowflake.ID, error)
	SetFriends(ctx context.Context, a, b snowflake.ID, friends bool) error
}

// Friends is a minimal relationships model: a symmetric friend set per
// user, held in memory and written through to an optional FriendStore,
// from which a user's set is loaded on first use.
type Friends struct {
	store FriendStore

	mu     sync.Mutex
	sets   map[snowflake.ID]map[snowflake.ID]struct{}
	loaded map[snowflake.ID]bool
}

var _ Relationships = (*Friends)(nil)

// NewFriends returns an empty model backed by store (nil keeps it in
// memory only).
func NewFriends(store FriendStore) *Friends {
	return &Friends{
		store:  store,
		sets:   make(map[snowflake.ID]map[snowflake.ID]struct{}),
		loaded: make(map[snowflake.ID]bool),
	}
}

// load fills a user's set from the store once. Called with mu held.
func (f *Friends) load(ctx context.Context, userID snowflake.ID) error {
	if f.store == nil || f.loaded[userID] {
		return nil
	}
	ids, err := f.store.LoadFriends(ctx, userID)
	if err != nil {
		return fmt.Errorf("presence: load friends of %s: %w", userID, err)
	}
	for _, id := range ids {
		f.link(userID, id)
	}
	f.loaded[userID] = true
	return nil
}

func (f *Friends) link(a, b snowflake.ID) {
	for _, p := range [][2]snowflake.ID{{a, b}, {b, a}} {
		if f.sets[p[0]] == nil {
			f.sets[p[0]] = make(map[snowflake.ID]struct{})
		}
		f.sets[p[0]][p[1]] = struct{}{}
	}
}

// Set makes a and b friends (or not), writing through to the store first.
func (f *Friends) Set(ctx context.Context, a, b snowflake.ID, friends bool) error {
	if a == b {
		return nil
	}
	if f.store != nil {
		if err := f.store.SetFriends(ctx, a, b, friends); err != nil {
			return fmt.Errorf("presence: set friends %s %s: %w", a, b, err)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if friends {
		f.link(a, b)
		return nil
	}
	delete(f.sets[a], b)
	delete(f.sets[b], a)
	return nil
}

// Friends returns a user's friends in id order.
func (f *Friends) Friends(ctx context.Context, userID snowflake.ID) ([]snowflake.ID, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.load(ctx, userID); err != nil {
		return nil, err
	}
	out := make([]snowflake.ID, 0, len(f.sets[userID]))
	for id := range f.sets[userID] {
		out = append(out, id)
	}
	slices.Sort(out)
	return out, nil
}
