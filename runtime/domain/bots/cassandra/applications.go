package cassandra

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/bots"
)

// CreateApplication claims the bot user (bot_applications_by_bot) and the
// application id with lightweight transactions, then indexes the owner. A
// create that failed half-way may be retried with the same application.
func (s *Store) CreateApplication(ctx context.Context, a bots.Application) error {
	doc, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("bots cassandra: encode application %d: %w", a.ID, err)
	}
	return s.op(ctx, func() error {
		prev := map[string]any{}
		claimed, err := s.session.Query(`INSERT INTO bot_applications_by_bot (bot_user_id, app_id)
			VALUES (?, ?) IF NOT EXISTS`, id(a.BotUserID), id(a.ID)).MapScanCASContext(ctx, prev)
		if err != nil {
			return wrapErr(fmt.Sprintf("claim bot user %d", a.BotUserID), err)
		}
		if !claimed && prev["app_id"] != id(a.ID) {
			return fmt.Errorf("bots cassandra: bot user %d: %w", a.BotUserID, bots.ErrExists)
		}
		created, err := s.session.Query(`INSERT INTO bot_applications (app_id, bot_user_id, owner_id, doc)
			VALUES (?, ?, ?, ?) IF NOT EXISTS`, id(a.ID), id(a.BotUserID), id(a.OwnerID), string(doc)).
			MapScanCASContext(ctx, map[string]any{})
		if err != nil {
			return wrapErr(fmt.Sprintf("create application %d", a.ID), err)
		}
		if !created {
			if claimed {
				// The id is taken: give the bot user back.
				if err := s.session.Query(`DELETE FROM bot_applications_by_bot WHERE bot_user_id = ? IF app_id = ?`,
					id(a.BotUserID), id(a.ID)).ExecContext(ctx); err != nil {
					s.log.Warn("bot user claim not released", "bot_user_id", a.BotUserID, "err", err)
				}
			}
			return fmt.Errorf("bots cassandra: application %d: %w", a.ID, bots.ErrExists)
		}
		return wrapErr(fmt.Sprintf("index application %d by owner", a.ID),
			s.session.Query(`INSERT INTO bot_applications_by_owner (owner_id, app_id) VALUES (?, ?)`,
				id(a.OwnerID), id(a.ID)).ExecContext(ctx))
	})
}

// PutApplication overwrites an existing application whose bot user and
// owner are unchanged (compare-and-set on both).
func (s *Store) PutApplication(ctx context.Context, a bots.Application) error {
	doc, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("bots cassandra: encode application %d: %w", a.ID, err)
	}
	return s.op(ctx, func() error {
		cur := map[string]any{}
		ok, err := s.session.Query(`UPDATE bot_applications SET doc = ? WHERE app_id = ?
			IF bot_user_id = ? AND owner_id = ?`, string(doc), id(a.ID), id(a.BotUserID), id(a.OwnerID)).
			MapScanCASContext(ctx, cur)
		if err != nil {
			return wrapErr(fmt.Sprintf("put application %d", a.ID), err)
		}
		if ok {
			return nil
		}
		if v, _ := cur["bot_user_id"].(int64); v == 0 {
			return fmt.Errorf("bots cassandra: application %d: %w", a.ID, bots.ErrNotFound)
		}
		return fmt.Errorf("bots cassandra: application %d: bot user and owner cannot change", a.ID)
	})
}

// GetApplication loads an application.
func (s *Store) GetApplication(ctx context.Context, appID snowflake.ID) (bots.Application, error) {
	var a bots.Application
	err := s.op(ctx, func() error {
		var doc string
		err := s.session.Query(`SELECT doc FROM bot_applications WHERE app_id = ?`, id(appID)).ScanContext(ctx, &doc)
		if err != nil {
			return wrapErr(fmt.Sprintf("application %d", appID), err)
		}
		if err := json.Unmarshal([]byte(doc), &a); err != nil {
			return fmt.Errorf("bots cassandra: decode application %d: %w", appID, err)
		}
		return nil
	})
	if err != nil {
		return bots.Application{}, err
	}
	return a, nil
}

// ApplicationByBot loads the application of a bot user.
func (s *Store) ApplicationByBot(ctx context.Context, botUserID snowflake.ID) (bots.Application, error) {
	var appID int64
	err := s.op(ctx, func() error {
		return wrapErr(fmt.Sprintf("application of bot %d", botUserID),
			s.session.Query(`SELECT app_id FROM bot_applications_by_bot WHERE bot_user_id = ?`, id(botUserID)).
				ScanContext(ctx, &appID))
	})
	if err != nil {
		return bots.Application{}, err
	}
	return s.GetApplication(ctx, snowflake.ID(appID))
}

// ApplicationsByOwner lists a user's applications by id.
func (s *Store) ApplicationsByOwner(ctx context.Context, ownerID snowflake.ID) ([]bots.Application, error) {
	var ids []int64
	err := s.op(ctx, func() error {
		iter := s.session.Query(`SELECT app_id FROM bot_applications_by_owner WHERE owner_id = ?`, id(ownerID)).
			IterContext(ctx)
		var v int64
		for iter.Scan(&v) {
			ids = append(ids, v)
		}
		return wrapErr(fmt.Sprintf("applications of %d", ownerID), iter.Close())
	})
	if err != nil {
		return nil, err
	}
	out := make([]bots.Application, 0, len(ids))
	for _, v := range ids {
		a, err := s.GetApplication(ctx, snowflake.ID(v))
		if errors.Is(err, bots.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}
