package pebble

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/bots"
)

// CreateApplication stores a new application and its indexes.
func (s *Store) CreateApplication(ctx context.Context, a bots.Application) error {
	if err := wrapCtx(ctx); err != nil {
		return err
	}
	return s.op(func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, k := range [][]byte{key('a', a.ID), key('b', a.BotUserID)} {
			ok, err := s.exists(k)
			if err != nil {
				return err
			}
			if ok {
				return fmt.Errorf("application %d: %w", a.ID, bots.ErrExists)
			}
		}
		b := s.db.NewBatch()
		defer b.Close()
		if err := setJSON(b, key('a', a.ID), a); err != nil {
			return err
		}
		if err := setJSON(b, key('b', a.BotUserID), a.ID); err != nil {
			return err
		}
		if err := b.Set(key('o', a.OwnerID, a.ID), nil, nil); err != nil {
			return err
		}
		return s.commit(b)
	})
}

// PutApplication overwrites an existing application.
func (s *Store) PutApplication(ctx context.Context, a bots.Application) error {
	if err := wrapCtx(ctx); err != nil {
		return err
	}
	return s.op(func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		var old bots.Application
		if err := s.get(key('a', a.ID), &old); err != nil {
			return fmt.Errorf("application %d: %w", a.ID, err)
		}
		if old.BotUserID != a.BotUserID || old.OwnerID != a.OwnerID {
			return fmt.Errorf("bots pebble: application %d: bot user and owner cannot change", a.ID)
		}
		b := s.db.NewBatch()
		defer b.Close()
		if err := setJSON(b, key('a', a.ID), a); err != nil {
			return err
		}
		return s.commit(b)
	})
}

// GetApplication loads an application.
func (s *Store) GetApplication(ctx context.Context, id snowflake.ID) (bots.Application, error) {
	var a bots.Application
	if err := wrapCtx(ctx); err != nil {
		return a, err
	}
	err := s.op(func() error { return s.get(key('a', id), &a) })
	if err != nil {
		return bots.Application{}, fmt.Errorf("application %d: %w", id, err)
	}
	return a, nil
}

// ApplicationByBot loads the application of a bot user.
func (s *Store) ApplicationByBot(ctx context.Context, botUserID snowflake.ID) (bots.Application, error) {
	var id snowflake.ID
	if err := wrapCtx(ctx); err != nil {
		return bots.Application{}, err
	}
	if err := s.op(func() error { return s.get(key('b', botUserID), &id) }); err != nil {
		return bots.Application{}, fmt.Errorf("application of bot %d: %w", botUserID, err)
	}
	return s.GetApplication(ctx, id)
}

// ApplicationsByOwner lists a user's applications by id.
func (s *Store) ApplicationsByOwner(ctx context.Context, ownerID snowflake.ID) ([]bots.Application, error) {
	if err := wrapCtx(ctx); err != nil {
		return nil, err
	}
	var ids []snowflake.ID
	err := s.op(func() error {
		return s.scan(key('o', ownerID), func(k, _ []byte) error {
			ids = append(ids, snowflake.ID(binary.BigEndian.Uint64(k[9:])))
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	out := make([]bots.Application, 0, len(ids))
	for _, id := range ids {
		a, err := s.GetApplication(ctx, id)
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

// PutCommand upserts a command.
func (s *Store) PutCommand(ctx context.Context, c bots.Command) error {
	if err := wrapCtx(ctx); err != nil {
		return err
	}
	return s.op(func() error {
		b := s.db.NewBatch()
		defer b.Close()
		if err := setJSON(b, key('c', c.ApplicationID, c.GuildID, c.ID), c); err != nil {
			return err
		}
		return s.commit(b)
	})
}

// GetCommand loads a command of one scope.
func (s *Store) GetCommand(ctx context.Context, appID, guildID, commandID snowflake.ID) (bots.Command, error) {
	var c bots.Command
	if err := wrapCtx(ctx); err != nil {
		return c, err
	}
	if err := s.op(func() error { return s.get(key('c', appID, guildID, commandID), &c) }); err != nil {
		return bots.Command{}, fmt.Errorf("command %d: %w", commandID, err)
	}
	return c, nil
}

// DeleteCommand deletes a command; a missing one is ErrNotFound.
func (s *Store) DeleteCommand(ctx context.Context, appID, guildID, commandID snowflake.ID) error {
	if err := wrapCtx(ctx); err != nil {
		return err
	}
	return s.op(func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		k := key('c', appID, guildID, commandID)
		ok, err := s.exists(k)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("command %d: %w", commandID, bots.ErrNotFound)
		}
		b := s.db.NewBatch()
		defer b.Close()
		if err := b.Delete(k, nil); err != nil {
			return err
		}
		return s.commit(b)
	})
}

// ListCommands lists one scope's commands by id.
func (s *Store) ListCommands(ctx context.Context, appID, guildID snowflake.ID) ([]bots.Command, error) {
	if err := wrapCtx(ctx); err != nil {
		return nil, err
	}
	var out []bots.Command
	err := s.op(func() (err error) {
		out, err = list[bots.Command](s, key('c', appID, guildID))
		return err
	})
	return out, err
}

// ReplaceCommands makes cmds the whole of one scope in one batch.
func (s *Store) ReplaceCommands(ctx context.Context, appID, guildID snowflake.ID, cmds []bots.Command) error {
	if err := wrapCtx(ctx); err != nil {
		return err
	}
	return s.op(func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		b := s.db.NewBatch()
		defer b.Close()
		prefix := key('c', appID, guildID)
		if err := b.DeleteRange(prefix, upper(prefix), nil); err != nil {
			return err
		}
		for _, c := range cmds {
			if c.ApplicationID != appID || c.GuildID != guildID {
				return fmt.Errorf("bots pebble: command %d is not in scope %d/%d", c.ID, appID, guildID)
			}
			if err := setJSON(b, key('c', appID, guildID, c.ID), c); err != nil {
				return err
			}
		}
		return s.commit(b)
	})
}

// PutInstallation upserts an installation.
func (s *Store) PutInstallation(ctx context.Context, in bots.Installation) error {
	if err := wrapCtx(ctx); err != nil {
		return err
	}
	return s.op(func() error {
		b := s.db.NewBatch()
		defer b.Close()
		if err := setJSON(b, key('g', in.GuildID, in.ApplicationID), in); err != nil {
			return err
		}
		return s.commit(b)
	})
}

// GetInstallation loads an installation.
func (s *Store) GetInstallation(ctx context.Context, guildID, appID snowflake.ID) (bots.Installation, error) {
	var in bots.Installation
	if err := wrapCtx(ctx); err != nil {
		return in, err
	}
	if err := s.op(func() error { return s.get(key('g', guildID, appID), &in) }); err != nil {
		return bots.Installation{}, fmt.Errorf("installation of %d in %d: %w", appID, guildID, err)
	}
	return in, nil
}

// DeleteInstallation deletes an installation; a missing one is ErrNotFound.
func (s *Store) DeleteInstallation(ctx context.Context, guildID, appID snowflake.ID) error {
	if err := wrapCtx(ctx); err != nil {
		return err
	}
	return s.op(func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		k := key('g', guildID, appID)
		ok, err := s.exists(k)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("installation of %d in %d: %w", appID, guildID, bots.ErrNotFound)
		}
		b := s.db.NewBatch()
		defer b.Close()
		if err := b.Delete(k, nil); err != nil {
			return err
		}
		return s.commit(b)
	})
}

// GuildInstallations lists a guild's installations by application id.
func (s *Store) GuildInstallations(ctx context.Context, guildID snowflake.ID) ([]bots.Installation, error) {
	if err := wrapCtx(ctx); err != nil {
		return nil, err
	}
	var out []bots.Installation
	err := s.op(func() (err error) {
		out, err = list[bots.Installation](s, key('g', guildID))
		return err
	})
	return out, err
}

// CreateInteraction stores a new interaction.
func (s *Store) CreateInteraction(ctx context.Context, in bots.Interaction) error {
	if err := wrapCtx(ctx); err != nil {
		return err
	}
	return s.op(func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		ok, err := s.exists(key('i', in.ID))
		if err != nil {
			return err
		}
		if ok {
			return fmt.Errorf("interaction %d: %w", in.ID, bots.ErrExists)
		}
		b := s.db.NewBatch()
		defer b.Close()
		if err := setJSON(b, key('i', in.ID), in); err != nil {
			return err
		}
		return s.commit(b)
	})
}

// GetInteraction loads an interaction.
func (s *Store) GetInteraction(ctx context.Context, id snowflake.ID) (bots.Interaction, error) {
	var in bots.Interaction
	if err := wrapCtx(ctx); err != nil {
		return in, err
	}
	if err := s.op(func() error { return s.get(key('i', id), &in) }); err != nil {
		return bots.Interaction{}, fmt.Errorf("interaction %d: %w", id, err)
	}
	return in, nil
}

// UpdateInteraction applies fn atomically and stores the result.
func (s *Store) UpdateInteraction(ctx context.Context, id snowflake.ID, fn func(*bots.Interaction) error) (bots.Interaction, error) {
	if err := wrapCtx(ctx); err != nil {
		return bots.Interaction{}, err
	}
	var in bots.Interaction
	err := s.op(func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if err := s.get(key('i', id), &in); err != nil {
			return fmt.Errorf("interaction %d: %w", id, err)
		}
		if err := fn(&in); err != nil {
			return err
		}
		in.ID = id
		b := s.db.NewBatch()
		defer b.Close()
		if err := setJSON(b, key('i', id), in); err != nil {
			return err
		}
		return s.commit(b)
	})
	if err != nil {
		return bots.Interaction{}, err
	}
	return in, nil
}

// DeleteInteractionsBefore drops interactions with ids below id.
func (s *Store) DeleteInteractionsBefore(ctx context.Context, id snowflake.ID) (int, error) {
	if err := wrapCtx(ctx); err != nil {
		return 0, err
	}
	n := 0
	err := s.op(func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		lo, hi := key('i'), key('i', id)
		if err := s.scanRange(lo, hi, func(_, _ []byte) error {
			n++
			return nil
		}); err != nil {
			return err
		}
		b := s.db.NewBatch()
		defer b.Close()
		if err := b.DeleteRange(lo, hi, nil); err != nil {
			return err
		}
		return s.commit(b)
	})
	return n, err
}
