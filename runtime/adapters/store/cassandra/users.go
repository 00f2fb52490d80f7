package cassandra

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Usernames are unique case-insensitively: usernames maps the lower-cased
// name to its owner and is claimed with a lightweight transaction
// (INSERT ... IF NOT EXISTS at LOCAL_SERIAL), so two processes can never
// both get the same name.

func nameKey(name string) string { return strings.ToLower(name) }

// claimName makes id the owner of name unless another user holds it.
func (s *Store) claimName(ctx context.Context, name string, id snowflake.ID) error {
	var owner int64
	var existing string
	applied, err := s.session.Query(`INSERT INTO usernames (name, user_id) VALUES (?, ?) IF NOT EXISTS`,
		nameKey(name), int64(id)).ScanCASContext(ctx, &existing, &owner)
	if err != nil {
		return wrapErr("claim username", err)
	}
	if !applied && snowflake.ID(owner) != id {
		return fmt.Errorf("username %q: %w", name, store.ErrExists)
	}
	return nil
}

// CreateUser stores a new user; a taken username (in any case) or id is
// store.ErrExists.
func (s *Store) CreateUser(ctx context.Context, u store.User) error {
	_, err := s.GetUser(ctx, u.ID)
	if err == nil {
		return fmt.Errorf("user %v: %w", u.ID, store.ErrExists)
	}
	if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if err := s.claimName(ctx, u.Username, u.ID); err != nil {
		return err
	}
	return s.writeUser(ctx, u)
}

// PutUser upserts a user. Renaming frees the old name; a new name that
// another user holds is store.ErrExists.
func (s *Store) PutUser(ctx context.Context, u store.User) error {
	old, err := s.GetUser(ctx, u.ID)
	found := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if err := s.claimName(ctx, u.Username, u.ID); err != nil {
		return err
	}
	if err := s.writeUser(ctx, u); err != nil {
		return err
	}
	if found && nameKey(old.Username) != nameKey(u.Username) {
		err := s.session.Query(`DELETE FROM usernames WHERE name = ? IF user_id = ?`,
			nameKey(old.Username), int64(u.ID)).ExecContext(ctx)
		if err != nil {
			return wrapErr("free old username", err)
		}
	}
	return nil
}

func (s *Store) writeUser(ctx context.Context, u store.User) error {
	doc, err := encodeDoc(u)
	if err != nil {
		return err
	}
	return wrapErr("put user", s.session.Query(`INSERT INTO users (user_id, doc) VALUES (?, ?)`,
		int64(u.ID), doc).ExecContext(ctx))
}

// GetUser returns a user by id.
func (s *Store) GetUser(ctx context.Context, id snowflake.ID) (store.User, error) {
	var u store.User
	err := s.getDoc(ctx, fmt.Sprintf("user %v", id), &u, `SELECT doc FROM users WHERE user_id = ?`, int64(id))
	return u, err
}

// GetUserByName returns a user by username, case-insensitively.
func (s *Store) GetUserByName(ctx context.Context, username string) (store.User, error) {
	var owner int64
	err := s.session.Query(`SELECT user_id FROM usernames WHERE name = ?`, nameKey(username)).ScanContext(ctx, &owner)
	if err != nil {
		return store.User{}, wrapErr(fmt.Sprintf("username %q", username), err)
	}
	return s.GetUser(ctx, snowflake.ID(owner))
}
