package cassandra

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/bots"
)

// PutInstallation upserts an installation.
func (s *Store) PutInstallation(ctx context.Context, in bots.Installation) error {
	doc, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("bots cassandra: encode installation of %d in %d: %w", in.ApplicationID, in.GuildID, err)
	}
	return s.op(ctx, func() error {
		return wrapErr(fmt.Sprintf("put installation of %d in %d", in.ApplicationID, in.GuildID), s.session.Query(
			`INSERT INTO bot_installations (guild_id, app_id, doc) VALUES (?, ?, ?)`,
			id(in.GuildID), id(in.ApplicationID), string(doc)).ExecContext(ctx))
	})
}

// GetInstallation loads an installation.
func (s *Store) GetInstallation(ctx context.Context, guildID, appID snowflake.ID) (bots.Installation, error) {
	var in bots.Installation
	err := s.op(ctx, func() error {
		var doc string
		err := s.session.Query(`SELECT doc FROM bot_installations WHERE guild_id = ? AND app_id = ?`,
			id(guildID), id(appID)).ScanContext(ctx, &doc)
		if err != nil {
			return wrapErr(fmt.Sprintf("installation of %d in %d", appID, guildID), err)
		}
		if err := json.Unmarshal([]byte(doc), &in); err != nil {
			return fmt.Errorf("bots cassandra: decode installation of %d in %d: %w", appID, guildID, err)
		}
		return nil
	})
	if err != nil {
		return bots.Installation{}, err
	}
	return in, nil
}

// DeleteInstallation deletes an installation; a missing one is
// ErrNotFound. (Two concurrent deletes of one installation may both
// succeed.)
func (s *Store) DeleteInstallation(ctx context.Context, guildID, appID snowflake.ID) error {
	if _, err := s.GetInstallation(ctx, guildID, appID); err != nil {
		return err
	}
	return s.op(ctx, func() error {
		return wrapErr(fmt.Sprintf("delete installation of %d in %d", appID, guildID), s.session.Query(
			`DELETE FROM bot_installations WHERE guild_id = ? AND app_id = ?`, id(guildID), id(appID)).ExecContext(ctx))
	})
}

// GuildInstallations lists a guild's installations by application id.
func (s *Store) GuildInstallations(ctx context.Context, guildID snowflake.ID) ([]bots.Installation, error) {
	var out []bots.Installation
	err := s.op(ctx, func() error {
		iter := s.session.Query(`SELECT doc FROM bot_installations WHERE guild_id = ?`, id(guildID)).IterContext(ctx)
		var doc string
		for iter.Scan(&doc) {
			var in bots.Installation
			if err := json.Unmarshal([]byte(doc), &in); err != nil {
				_ = iter.Close()
				return fmt.Errorf("bots cassandra: decode installation in %d: %w", guildID, err)
			}
			out = append(out, in)
		}
		return wrapErr(fmt.Sprintf("installations of %d", guildID), iter.Close())
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
