package cassandra

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Guild state: each record is a JSON document (column doc) under the key
// columns its queries need. Index tables (guild_channels, private_channels,
// user_guilds, guild_invites) are written in the same logged batch as the
// record, so a record and its index entries never disagree after a write
// returns. Read-modify-writes (a channel changing guild or recipients, an
// invite changing guild) read the old record first; two concurrent writers
// of the same record may leave a stale index entry, which readers skip.

func encodeDoc(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("cassandra store: encode: %w", err)
	}
	return string(b), nil
}

func decodeDoc(doc string, v any) error {
	if err := json.Unmarshal([]byte(doc), v); err != nil {
		return fmt.Errorf("cassandra store: decode: %w", err)
	}
	return nil
}

// getDoc reads one doc column into v.
func (s *Store) getDoc(ctx context.Context, what string, v any, stmt string, args ...any) error {
	var doc string
	if err := s.session.Query(stmt, args...).ScanContext(ctx, &doc); err != nil {
		return wrapErr("get "+what, err)
	}
	return decodeDoc(doc, v)
}

// scanDocs calls fn for each doc of a query, in clustering order.
func (s *Store) scanDocs(ctx context.Context, what string, fn func(doc string) error, stmt string, args ...any) error {
	iter := s.session.Query(stmt, args...).IterContext(ctx)
	var doc string
	for iter.Scan(&doc) {
		if err := fn(doc); err != nil {
			iter.Close()
			return err
		}
	}
	return wrapErr("list "+what, iter.Close())
}

// scanIDs returns the bigint column of a query's rows.
func (s *Store) scanIDs(ctx context.Context, what, stmt string, args ...any) ([]snowflake.ID, error) {
	iter := s.session.Query(stmt, args...).IterContext(ctx)
	var out []snowflake.ID
	var id int64
	for iter.Scan(&id) {
		out = append(out, snowflake.ID(id))
	}
	return out, wrapErr("list "+what, iter.Close())
}

func (s *Store) logged(ctx context.Context) *gocql.Batch {
	return s.session.Batch(gocql.LoggedBatch)
}

func execBatch(ctx context.Context, b *gocql.Batch, op string) error {
	if b.Size() == 0 {
		return nil
	}
	return wrapErr(op, b.ExecContext(ctx))
}

// PutGuild upserts the guild record.
func (s *Store) PutGuild(ctx context.Context, g store.Guild) error {
	doc, err := encodeDoc(g)
	if err != nil {
		return err
	}
	return wrapErr("put guild", s.session.Query(`INSERT INTO guilds (guild_id, doc) VALUES (?, ?)`,
		int64(g.ID), doc).ExecContext(ctx))
}

// DeleteGuild removes the guild with its channels (and their messages),
// roles, members (and their user -> guild entries) and invites. The guild
// record goes last, so a failed delete can be retried. An unknown guild is
// store.ErrNotFound.
func (s *Store) DeleteGuild(ctx context.Context, guildID snowflake.ID) error {
	var g store.Guild
	if err := s.getDoc(ctx, fmt.Sprintf("guild %v", guildID), &g,
		`SELECT doc FROM guilds WHERE guild_id = ?`, int64(guildID)); err != nil {
		return err
	}
	var channels []store.Channel
	err := s.scanDocs(ctx, "guild channels", func(doc string) error {
		var c store.Channel
		if err := decodeDoc(doc, &c); err != nil {
			return err
		}
		channels = append(channels, c)
		return nil
	}, `SELECT doc FROM guild_channels WHERE guild_id = ?`, int64(guildID))
	if err != nil {
		return err
	}
	for _, c := range channels {
		if err := s.deleteChannel(ctx, c); err != nil {
			return err
		}
	}
	users, err := s.scanIDs(ctx, "members", `SELECT user_id FROM members WHERE guild_id = ?`, int64(guildID))
	if err != nil {
		return err
	}
	b := s.session.Batch(gocql.UnloggedBatch)
	for _, u := range users {
		b.Query(`DELETE FROM user_guilds WHERE user_id = ? AND guild_id = ?`, int64(u), int64(guildID))
		if b.Size() == 100 {
			if err := execBatch(ctx, b, "delete guild: user index"); err != nil {
				return err
			}
			b = s.session.Batch(gocql.UnloggedBatch)
		}
	}
	if err := execBatch(ctx, b, "delete guild: user index"); err != nil {
		return err
	}
	iter := s.session.Query(`SELECT code FROM guild_invites WHERE guild_id = ?`, int64(guildID)).IterContext(ctx)
	var codes []string
	var code string
	for iter.Scan(&code) {
		codes = append(codes, code)
	}
	if err := iter.Close(); err != nil {
		return wrapErr("delete guild: list invites", err)
	}
	b = s.logged(ctx)
	for _, c := range codes {
		b.Query(`DELETE FROM invites WHERE code = ?`, c)
	}
	b.Query(`DELETE FROM guild_invites WHERE guild_id = ?`, int64(guildID))
	b.Query(`DELETE FROM members WHERE guild_id = ?`, int64(guildID))
	b.Query(`DELETE FROM roles WHERE guild_id = ?`, int64(guildID))
	b.Query(`DELETE FROM guild_channels WHERE guild_id = ?`, int64(guildID))
	b.Query(`DELETE FROM guilds WHERE guild_id = ?`, int64(guildID))
	return execBatch(ctx, b, "delete guild")
}

// LoadGuild returns the guild with its channels, roles and members, each
// ordered by id (members by user id).
func (s *Store) LoadGuild(ctx context.Context, guildID snowflake.ID) (store.GuildState, error) {
	var st store.GuildState
	if err := s.getDoc(ctx, fmt.Sprintf("guild %v", guildID), &st.Guild,
		`SELECT doc FROM guilds WHERE guild_id = ?`, int64(guildID)); err != nil {
		return st, err
	}
	err := s.scanDocs(ctx, "channels", func(doc string) error {
		var c store.Channel
		err := decodeDoc(doc, &c)
		st.Channels = append(st.Channels, c)
		return err
	}, `SELECT doc FROM guild_channels WHERE guild_id = ?`, int64(guildID))
	if err != nil {
		return st, err
	}
	err = s.scanDocs(ctx, "roles", func(doc string) error {
		var r store.Role
		err := decodeDoc(doc, &r)
		st.Roles = append(st.Roles, r)
		return err
	}, `SELECT doc FROM roles WHERE guild_id = ?`, int64(guildID))
	if err != nil {
		return st, err
	}
	err = s.scanDocs(ctx, "members", func(doc string) error {
		var m store.Member
		err := decodeDoc(doc, &m)
		st.Members = append(st.Members, m)
		return err
	}, `SELECT doc FROM members WHERE guild_id = ?`, int64(guildID))
	return st, err
}

func (s *Store) getChannel(ctx context.Context, id snowflake.ID) (store.Channel, error) {
	var c store.Channel
	err := s.getDoc(ctx, fmt.Sprintf("channel %v", id), &c, `SELECT doc FROM channels WHERE channel_id = ?`, int64(id))
	return c, err
}

// PutChannel upserts a channel (guild channel, DM or group DM) and keeps
// the guild's channel list and the recipients' private channel index in
// step, also when the guild or the recipients changed.
func (s *Store) PutChannel(ctx context.Context, c store.Channel) error {
	doc, err := encodeDoc(c)
	if err != nil {
		return err
	}
	b := s.logged(ctx)
	old, err := s.getChannel(ctx, c.ID)
	switch {
	case err == nil:
		if old.GuildID != 0 && old.GuildID != c.GuildID {
			b.Query(`DELETE FROM guild_channels WHERE guild_id = ? AND channel_id = ?`, int64(old.GuildID), int64(c.ID))
		}
		for _, r := range old.Recipients {
			if !slices.Contains(c.Recipients, r) {
				b.Query(`DELETE FROM private_channels WHERE user_id = ? AND channel_id = ?`, int64(r), int64(c.ID))
			}
		}
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	b.Query(`INSERT INTO channels (channel_id, guild_id, doc) VALUES (?, ?, ?)`, int64(c.ID), int64(c.GuildID), doc)
	if c.GuildID != 0 {
		b.Query(`INSERT INTO guild_channels (guild_id, channel_id, doc) VALUES (?, ?, ?)`, int64(c.GuildID), int64(c.ID), doc)
	}
	for _, r := range c.Recipients {
		b.Query(`INSERT INTO private_channels (user_id, channel_id) VALUES (?, ?)`, int64(r), int64(c.ID))
	}
	return execBatch(ctx, b, "put channel")
}

// GetChannel returns a channel by id, whatever its guild.
func (s *Store) GetChannel(ctx context.Context, channelID snowflake.ID) (store.Channel, error) {
	return s.getChannel(ctx, channelID)
}

// DeleteChannel removes a channel, its index entries and its messages.
func (s *Store) DeleteChannel(ctx context.Context, channelID snowflake.ID) error {
	c, err := s.getChannel(ctx, channelID)
	if err != nil {
		return err
	}
	return s.deleteChannel(ctx, c)
}

// deleteChannel drops c's message buckets (one partition tombstone each),
// bucket list and widths, then the channel record and its index entries.
func (s *Store) deleteChannel(ctx context.Context, c store.Channel) error {
	buckets, err := s.Buckets(ctx, c.ID)
	if err != nil {
		return err
	}
	for _, bk := range buckets {
		err := s.session.Query(`DELETE FROM messages WHERE channel_id = ? AND bucket = ?`, int64(c.ID), bk).
			ExecContext(ctx)
		if err != nil {
			return wrapErr("delete channel messages", err)
		}
	}
	b := s.logged(ctx)
	b.Query(`DELETE FROM channel_buckets WHERE channel_id = ?`, int64(c.ID))
	b.Query(`DELETE FROM channel_bucket_widths WHERE channel_id = ?`, int64(c.ID))
	if c.GuildID != 0 {
		b.Query(`DELETE FROM guild_channels WHERE guild_id = ? AND channel_id = ?`, int64(c.GuildID), int64(c.ID))
	}
	for _, r := range c.Recipients {
		b.Query(`DELETE FROM private_channels WHERE user_id = ? AND channel_id = ?`, int64(r), int64(c.ID))
	}
	b.Query(`DELETE FROM channels WHERE channel_id = ?`, int64(c.ID))
	err = execBatch(ctx, b, "delete channel")
	s.widths.forget(c.ID)
	return err
}

// PrivateChannels lists the DMs and group DMs userID is a recipient of,
// ordered by channel id.
func (s *Store) PrivateChannels(ctx context.Context, userID snowflake.ID) ([]store.Channel, error) {
	ids, err := s.scanIDs(ctx, "private channels", `SELECT channel_id FROM private_channels WHERE user_id = ?`, int64(userID))
	if err != nil {
		return nil, err
	}
	var out []store.Channel
	for _, id := range ids {
		c, err := s.getChannel(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			continue // deleted in between
		}
		if err != nil {
			return nil, err
		}
		if slices.Contains(c.Recipients, userID) {
			out = append(out, c)
		}
	}
	return out, nil
}

// PutRole upserts a role.
func (s *Store) PutRole(ctx context.Context, r store.Role) error {
	doc, err := encodeDoc(r)
	if err != nil {
		return err
	}
	return wrapErr("put role", s.session.Query(`INSERT INTO roles (guild_id, role_id, doc) VALUES (?, ?, ?)`,
		int64(r.GuildID), int64(r.ID), doc).ExecContext(ctx))
}

// DeleteRole removes a role; an unknown role is store.ErrNotFound.
func (s *Store) DeleteRole(ctx context.Context, guildID, roleID snowflake.ID) error {
	var id int64
	if err := s.session.Query(`SELECT role_id FROM roles WHERE guild_id = ? AND role_id = ?`,
		int64(guildID), int64(roleID)).ScanContext(ctx, &id); err != nil {
		return wrapErr(fmt.Sprintf("delete role %v", roleID), err)
	}
	return wrapErr("delete role", s.session.Query(`DELETE FROM roles WHERE guild_id = ? AND role_id = ?`,
		int64(guildID), int64(roleID)).ExecContext(ctx))
}

// PutMember upserts a membership and the user -> guild index entry.
func (s *Store) PutMember(ctx context.Context, m store.Member) error {
	doc, err := encodeDoc(m)
	if err != nil {
		return err
	}
	b := s.logged(ctx)
	b.Query(`INSERT INTO members (guild_id, user_id, doc) VALUES (?, ?, ?)`, int64(m.GuildID), int64(m.UserID), doc)
	b.Query(`INSERT INTO user_guilds (user_id, guild_id) VALUES (?, ?)`, int64(m.UserID), int64(m.GuildID))
	return execBatch(ctx, b, "put member")
}

// DeleteMember removes a membership; an unknown one is store.ErrNotFound.
func (s *Store) DeleteMember(ctx context.Context, guildID, userID snowflake.ID) error {
	var id int64
	if err := s.session.Query(`SELECT user_id FROM members WHERE guild_id = ? AND user_id = ?`,
		int64(guildID), int64(userID)).ScanContext(ctx, &id); err != nil {
		return wrapErr(fmt.Sprintf("delete member %v/%v", guildID, userID), err)
	}
	b := s.logged(ctx)
	b.Query(`DELETE FROM members WHERE guild_id = ? AND user_id = ?`, int64(guildID), int64(userID))
	b.Query(`DELETE FROM user_guilds WHERE user_id = ? AND guild_id = ?`, int64(userID), int64(guildID))
	return execBatch(ctx, b, "delete member")
}

// UserGuilds lists the guilds userID is a member of, ordered by id.
func (s *Store) UserGuilds(ctx context.Context, userID snowflake.ID) ([]snowflake.ID, error) {
	return s.scanIDs(ctx, "user guilds", `SELECT guild_id FROM user_guilds WHERE user_id = ?`, int64(userID))
}

// PutInvite upserts an invite by code.
func (s *Store) PutInvite(ctx context.Context, inv store.Invite) error {
	if inv.Code == "" {
		return errors.New("cassandra store: put invite: empty code")
	}
	doc, err := encodeDoc(inv)
	if err != nil {
		return err
	}
	b := s.logged(ctx)
	old, err := s.getInvite(ctx, inv.Code)
	switch {
	case err == nil:
		if old.GuildID != inv.GuildID {
			b.Query(`DELETE FROM guild_invites WHERE guild_id = ? AND code = ?`, int64(old.GuildID), inv.Code)
		}
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	b.Query(`INSERT INTO invites (code, guild_id, doc) VALUES (?, ?, ?)`, inv.Code, int64(inv.GuildID), doc)
	b.Query(`INSERT INTO guild_invites (guild_id, code) VALUES (?, ?)`, int64(inv.GuildID), inv.Code)
	return execBatch(ctx, b, "put invite")
}

func (s *Store) getInvite(ctx context.Context, code string) (store.Invite, error) {
	var inv store.Invite
	err := s.getDoc(ctx, fmt.Sprintf("invite %q", code), &inv, `SELECT doc FROM invites WHERE code = ?`, code)
	return inv, err
}

// GetInvite returns an invite by code.
func (s *Store) GetInvite(ctx context.Context, code string) (store.Invite, error) {
	return s.getInvite(ctx, code)
}

// DeleteInvite removes an invite; an unknown code is store.ErrNotFound.
func (s *Store) DeleteInvite(ctx context.Context, code string) error {
	inv, err := s.getInvite(ctx, code)
	if err != nil {
		return err
	}
	b := s.logged(ctx)
	b.Query(`DELETE FROM invites WHERE code = ?`, code)
	b.Query(`DELETE FROM guild_invites WHERE guild_id = ? AND code = ?`, int64(inv.GuildID), code)
	return execBatch(ctx, b, "delete invite")
}
