package cassandra

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/bots"
)

// PutCommand upserts a command.
func (s *Store) PutCommand(ctx context.Context, c bots.Command) error {
	doc, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("bots cassandra: encode command %d: %w", c.ID, err)
	}
	return s.op(ctx, func() error {
		return wrapErr(fmt.Sprintf("put command %d", c.ID), s.session.Query(
			`INSERT INTO bot_commands (app_id, guild_id, command_id, doc) VALUES (?, ?, ?, ?)`,
			id(c.ApplicationID), id(c.GuildID), id(c.ID), string(doc)).ExecContext(ctx))
	})
}

// GetCommand loads a command of one scope.
func (s *Store) GetCommand(ctx context.Context, appID, guildID, commandID snowflake.ID) (bots.Command, error) {
	var c bots.Command
	err := s.op(ctx, func() error {
		var doc string
		err := s.session.Query(`SELECT doc FROM bot_commands WHERE app_id = ? AND guild_id = ? AND command_id = ?`,
			id(appID), id(guildID), id(commandID)).ScanContext(ctx, &doc)
		if err != nil {
			return wrapErr(fmt.Sprintf("command %d", commandID), err)
		}
		if err := json.Unmarshal([]byte(doc), &c); err != nil {
			return fmt.Errorf("bots cassandra: decode command %d: %w", commandID, err)
		}
		return nil
	})
	if err != nil {
		return bots.Command{}, err
	}
	return c, nil
}

// DeleteCommand deletes a command; a missing one is ErrNotFound. (Two
// concurrent deletes of one command may both succeed.)
func (s *Store) DeleteCommand(ctx context.Context, appID, guildID, commandID snowflake.ID) error {
	if _, err := s.GetCommand(ctx, appID, guildID, commandID); err != nil {
		return err
	}
	return s.op(ctx, func() error {
		return wrapErr(fmt.Sprintf("delete command %d", commandID), s.session.Query(
			`DELETE FROM bot_commands WHERE app_id = ? AND guild_id = ? AND command_id = ?`,
			id(appID), id(guildID), id(commandID)).ExecContext(ctx))
	})
}

// ListCommands lists one scope's commands by id.
func (s *Store) ListCommands(ctx context.Context, appID, guildID snowflake.ID) ([]bots.Command, error) {
	var out []bots.Command
	err := s.op(ctx, func() error {
		iter := s.session.Query(`SELECT doc FROM bot_commands WHERE app_id = ? AND guild_id = ?`,
			id(appID), id(guildID)).IterContext(ctx)
		var doc string
		for iter.Scan(&doc) {
			var c bots.Command
			if err := json.Unmarshal([]byte(doc), &c); err != nil {
				_ = iter.Close()
				return fmt.Errorf("bots cassandra: decode command of %d/%d: %w", appID, guildID, err)
			}
			out = append(out, c)
		}
		return wrapErr(fmt.Sprintf("commands of %d/%d", appID, guildID), iter.Close())
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ReplaceCommands makes cmds the whole of one scope: one batch on the
// scope's partition deletes the partition and inserts cmds. A
// single-partition batch is applied atomically and in isolation by every
// replica, so readers see the old set or the new one, never a mix. The
// deletion is timestamped one microsecond before the inserts, which a
// deletion at the same timestamp would shadow.
func (s *Store) ReplaceCommands(ctx context.Context, appID, guildID snowflake.ID, cmds []bots.Command) error {
	docs := make([]string, len(cmds))
	for i, c := range cmds {
		if c.ApplicationID != appID || c.GuildID != guildID {
			return fmt.Errorf("bots cassandra: command %d is not in scope %d/%d", c.ID, appID, guildID)
		}
		doc, err := json.Marshal(c)
		if err != nil {
			return fmt.Errorf("bots cassandra: encode command %d: %w", c.ID, err)
		}
		docs[i] = string(doc)
	}
	return s.op(ctx, func() error {
		ts := time.Now().UnixMicro()
		b := s.session.Batch(gocql.LoggedBatch)
		b.Query(`DELETE FROM bot_commands USING TIMESTAMP ? WHERE app_id = ? AND guild_id = ?`,
			ts-1, id(appID), id(guildID))
		for i, c := range cmds {
			b.Query(`INSERT INTO bot_commands (app_id, guild_id, command_id, doc) VALUES (?, ?, ?, ?)
				USING TIMESTAMP ?`, id(appID), id(guildID), id(c.ID), docs[i], ts)
		}
		return wrapErr(fmt.Sprintf("replace commands of %d/%d", appID, guildID), b.ExecContext(ctx))
	})
}
