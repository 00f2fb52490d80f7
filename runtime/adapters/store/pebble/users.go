package pebble

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Usernames are unique case-insensitively: the index key is the lower-cased
// name (strings.ToLower) and maps to the owner's id. userMu makes the
// check and the write one atomic step.

// CreateUser stores a new user; a taken username (in any case) or id is
// ErrExists.
func (s *Store) CreateUser(ctx context.Context, u store.User) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.end()
	s.userMu.Lock()
	defer s.userMu.Unlock()
	ok, err := s.exists(key1(tagUser, u.ID))
	if err != nil {
		return err
	}
	if ok {
		return fmt.Errorf("user %v: %w", u.ID, store.ErrExists)
	}
	owner, err := s.usernameOwner(u.Username)
	if err != nil {
		return err
	}
	if owner != 0 {
		return fmt.Errorf("username %q: %w", u.Username, store.ErrExists)
	}
	return s.writeUser(u, "")
}

// PutUser upserts a user. Renaming frees the old name; a new name that
// another user holds is ErrExists.
func (s *Store) PutUser(ctx context.Context, u store.User) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.end()
	s.userMu.Lock()
	defer s.userMu.Unlock()
	old, err := s.getUser(u.ID)
	found := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	owner, err := s.usernameOwner(u.Username)
	if err != nil {
		return err
	}
	if owner != 0 && owner != u.ID {
		return fmt.Errorf("username %q: %w", u.Username, store.ErrExists)
	}
	oldName := ""
	if found && string(usernameKey(old.Username)) != string(usernameKey(u.Username)) {
		oldName = old.Username
	}
	return s.writeUser(u, oldName)
}

func (s *Store) writeUser(u store.User, freeName string) error {
	o := s.newOps()
	o.set(key1(tagUser, u.ID), u)
	if freeName != "" {
		o.del(usernameKey(freeName))
	}
	o.setRaw(usernameKey(u.Username), binary.BigEndian.AppendUint64(nil, uint64(u.ID)))
	return s.apply(o, "put user")
}

// usernameOwner returns the id holding name, or 0.
func (s *Store) usernameOwner(name string) (snowflake.ID, error) {
	var id snowflake.ID
	err := s.get(usernameKey(name), "username", func(v []byte) error {
		if len(v) != 8 {
			return fmt.Errorf("%w: username index", errCorrupt)
		}
		id = snowflake.ID(binary.BigEndian.Uint64(v))
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	return id, err
}

func (s *Store) getUser(id snowflake.ID) (store.User, error) {
	var u store.User
	err := s.get(key1(tagUser, id), fmt.Sprintf("user %v", id),
		func(v []byte) error { return decodeJSON(v, &u) })
	return u, err
}

// GetUser returns a user by id.
func (s *Store) GetUser(ctx context.Context, id snowflake.ID) (store.User, error) {
	if err := s.begin(ctx); err != nil {
		return store.User{}, err
	}
	defer s.end()
	return s.getUser(id)
}

// GetUserByName returns a user by username, case-insensitively.
func (s *Store) GetUserByName(ctx context.Context, username string) (store.User, error) {
	if err := s.begin(ctx); err != nil {
		return store.User{}, err
	}
	defer s.end()
	owner, err := s.usernameOwner(username)
	if err != nil {
		return store.User{}, err
	}
	if owner == 0 {
		return store.User{}, fmt.Errorf("username %q: %w", username, store.ErrNotFound)
	}
	return s.getUser(owner)
}
