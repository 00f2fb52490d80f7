package pebble

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// setJSON encodes v and sets it at k in b.
func setJSON(b *pebble.Batch, k []byte, v any) error {
	enc, err := encodeJSON(v)
	if err != nil {
		return err
	}
	if err := b.Set(k, enc, nil); err != nil {
		return wrapErr("batch set", err)
	}
	return nil
}

// batchOps collects batch errors so call sites stay flat.
type batchOps struct {
	b   *pebble.Batch
	err error
}

func (o *batchOps) set(k []byte, v any) {
	if o.err == nil {
		o.err = setJSON(o.b, k, v)
	}
}

func (o *batchOps) setRaw(k, v []byte) {
	if o.err == nil {
		if err := o.b.Set(k, v, nil); err != nil {
			o.err = wrapErr("batch set", err)
		}
	}
}

func (o *batchOps) del(k []byte) {
	if o.err == nil {
		if err := o.b.Delete(k, nil); err != nil {
			o.err = wrapErr("batch delete", err)
		}
	}
}

func (o *batchOps) delPrefix(p []byte) {
	if o.err == nil {
		if err := o.b.DeleteRange(p, prefixEnd(p), nil); err != nil {
			o.err = wrapErr("batch delete range", err)
		}
	}
}

// apply commits the batch durably unless an op failed.
func (s *Store) apply(o *batchOps, op string) error {
	if o.err != nil {
		o.b.Close()
		return fmt.Errorf("pebble store: %s: %w", op, o.err)
	}
	return s.commit(o.b, op)
}

func (s *Store) newOps() *batchOps { return &batchOps{b: s.db.NewBatch()} }

// PutGuild upserts the guild record.
func (s *Store) PutGuild(ctx context.Context, g store.Guild) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.end()
	o := s.newOps()
	o.set(key1(tagGuild, g.ID), g)
	return s.apply(o, "put guild")
}

// DeleteGuild removes the guild, its channels (with their messages), roles,
// members (with their user -> guild index entries) and invites, in one
// durable batch. An unknown guild is ErrNotFound.
func (s *Store) DeleteGuild(ctx context.Context, guildID snowflake.ID) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.end()
	s.metaMu.Lock()
	defer s.metaMu.Unlock()
	ok, err := s.exists(key1(tagGuild, guildID))
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("guild %v: %w", guildID, store.ErrNotFound)
	}
	o := s.newOps()
	o.del(key1(tagGuild, guildID))

	var channels []store.Channel
	err = s.scan(key1(tagGuildChannel, guildID), func(_, v []byte) error {
		var c store.Channel
		if err := decodeJSON(v, &c); err != nil {
			return err
		}
		channels = append(channels, c)
		return nil
	})
	if err != nil {
		return err
	}
	for _, c := range channels {
		s.deleteChannelOps(o, c)
	}
	o.delPrefix(key1(tagRole, guildID))

	err = s.scan(key1(tagMember, guildID), func(k, _ []byte) error {
		user := snowflake.ID(binary.BigEndian.Uint64(k[9:17]))
		o.del(key2(tagUserGuild, user, guildID))
		return nil
	})
	if err != nil {
		return err
	}
	o.delPrefix(key1(tagMember, guildID))

	gi := key1(tagGuildInvite, guildID)
	err = s.scan(gi, func(k, _ []byte) error {
		o.del(inviteKey(string(k[len(gi):])))
		return nil
	})
	if err != nil {
		return err
	}
	o.delPrefix(gi)

	// Hold the channel locks so no bulk delete interleaves with the
	// message range deletions.
	unlock := s.lockChannels(channels)
	defer unlock()
	return s.apply(o, "delete guild")
}

// LoadGuild returns the guild with its channels, roles and members, each
// ordered by id (members by user id), from one consistent snapshot.
func (s *Store) LoadGuild(ctx context.Context, guildID snowflake.ID) (store.GuildState, error) {
	if err := s.begin(ctx); err != nil {
		return store.GuildState{}, err
	}
	defer s.end()
	snap := s.db.NewSnapshot()
	defer snap.Close()
	var st store.GuildState
	v, closer, err := snap.Get(key1(tagGuild, guildID))
	if errors.Is(err, pebble.ErrNotFound) {
		return st, fmt.Errorf("guild %v: %w", guildID, store.ErrNotFound)
	}
	if err != nil {
		return st, wrapErr("load guild", err)
	}
	err = decodeJSON(v, &st.Guild)
	closer.Close()
	if err != nil {
		return st, err
	}
	if err := scanSnap(snap, key1(tagGuildChannel, guildID), func(_, v []byte) error {
		var c store.Channel
		err := decodeJSON(v, &c)
		st.Channels = append(st.Channels, c)
		return err
	}); err != nil {
		return store.GuildState{}, err
	}
	if err := scanSnap(snap, key1(tagRole, guildID), func(_, v []byte) error {
		var r store.Role
		err := decodeJSON(v, &r)
		st.Roles = append(st.Roles, r)
		return err
	}); err != nil {
		return store.GuildState{}, err
	}
	if err := scanSnap(snap, key1(tagMember, guildID), func(_, v []byte) error {
		var m store.Member
		err := decodeJSON(v, &m)
		st.Members = append(st.Members, m)
		return err
	}); err != nil {
		return store.GuildState{}, err
	}
	return st, nil
}

// scanSnap is scan over a snapshot.
func scanSnap(snap *pebble.Snapshot, p []byte, fn func(k, v []byte) error) error {
	return scanReader(snap, p, fn)
}

func (s *Store) getChannel(id snowflake.ID) (store.Channel, error) {
	var c store.Channel
	err := s.get(key1(tagChannel, id), fmt.Sprintf("channel %v", id),
		func(v []byte) error { return decodeJSON(v, &c) })
	return c, err
}

// PutChannel upserts a channel (guild channel, DM or group DM) and keeps
// the guild's channel list and the recipients' private channel index in
// step, also when the guild or the recipients changed.
func (s *Store) PutChannel(ctx context.Context, c store.Channel) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.end()
	s.metaMu.Lock()
	defer s.metaMu.Unlock()
	o := s.newOps()
	old, err := s.getChannel(c.ID)
	switch {
	case err == nil:
		if old.GuildID != 0 && old.GuildID != c.GuildID {
			o.del(key2(tagGuildChannel, old.GuildID, c.ID))
		}
		for _, r := range old.Recipients {
			if !slices.Contains(c.Recipients, r) {
				o.del(key2(tagPrivate, r, c.ID))
			}
		}
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	o.set(key1(tagChannel, c.ID), c)
	if c.GuildID != 0 {
		o.set(key2(tagGuildChannel, c.GuildID, c.ID), c)
	}
	for _, r := range c.Recipients {
		o.setRaw(key2(tagPrivate, r, c.ID), nil)
	}
	return s.apply(o, "put channel")
}

// GetChannel returns a channel by id, whatever its guild.
func (s *Store) GetChannel(ctx context.Context, channelID snowflake.ID) (store.Channel, error) {
	if err := s.begin(ctx); err != nil {
		return store.Channel{}, err
	}
	defer s.end()
	return s.getChannel(channelID)
}

// DeleteChannel removes a channel, its index entries and its messages.
func (s *Store) DeleteChannel(ctx context.Context, channelID snowflake.ID) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.end()
	s.metaMu.Lock()
	defer s.metaMu.Unlock()
	c, err := s.getChannel(channelID)
	if err != nil {
		return err
	}
	o := s.newOps()
	s.deleteChannelOps(o, c)
	unlock := s.lockChannels([]store.Channel{c})
	defer unlock()
	return s.apply(o, "delete channel")
}

func (s *Store) deleteChannelOps(o *batchOps, c store.Channel) {
	o.del(key1(tagChannel, c.ID))
	if c.GuildID != 0 {
		o.del(key2(tagGuildChannel, c.GuildID, c.ID))
	}
	for _, r := range c.Recipients {
		o.del(key2(tagPrivate, r, c.ID))
	}
	o.delPrefix(key1(tagMessage, c.ID))
	o.delPrefix(key1(tagBucket, c.ID))
}

// lockChannels takes the channel locks of cs exclusively, each stripe once.
func (s *Store) lockChannels(cs []store.Channel) (unlock func()) {
	var stripes []int
	for _, c := range cs {
		if i := s.chStripe(c.ID); !slices.Contains(stripes, i) {
			stripes = append(stripes, i)
		}
	}
	slices.Sort(stripes) // a fixed order avoids deadlocks between lockers
	for _, i := range stripes {
		s.chLocks[i].Lock()
	}
	return func() {
		for _, i := range stripes {
			s.chLocks[i].Unlock()
		}
	}
}

// PrivateChannels lists the DMs and group DMs userID is a recipient of,
// ordered by channel id.
func (s *Store) PrivateChannels(ctx context.Context, userID snowflake.ID) ([]store.Channel, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.end()
	var ids []snowflake.ID
	if err := s.scan(key1(tagPrivate, userID), func(k, _ []byte) error {
		ids = append(ids, snowflake.ID(binary.BigEndian.Uint64(k[9:17])))
		return nil
	}); err != nil {
		return nil, err
	}
	out := make([]store.Channel, 0, len(ids))
	for _, id := range ids {
		c, err := s.getChannel(id)
		if errors.Is(err, store.ErrNotFound) {
			continue // deleted in between
		}
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// PutRole upserts a role.
func (s *Store) PutRole(ctx context.Context, r store.Role) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.end()
	o := s.newOps()
	o.set(key2(tagRole, r.GuildID, r.ID), r)
	return s.apply(o, "put role")
}

// DeleteRole removes a role; an unknown role is ErrNotFound.
func (s *Store) DeleteRole(ctx context.Context, guildID, roleID snowflake.ID) error {
	return s.deleteKeys(ctx, fmt.Sprintf("role %v of guild %v", roleID, guildID), key2(tagRole, guildID, roleID))
}

// deleteKeys deletes keys durably if the first exists, else ErrNotFound.
func (s *Store) deleteKeys(ctx context.Context, what string, keys ...[]byte) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.end()
	ok, err := s.exists(keys[0])
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	o := s.newOps()
	for _, k := range keys {
		o.del(k)
	}
	return s.apply(o, "delete "+what)
}

// PutMember upserts a membership and the user -> guild index entry.
func (s *Store) PutMember(ctx context.Context, m store.Member) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.end()
	s.metaMu.RLock()
	defer s.metaMu.RUnlock()
	o := s.newOps()
	o.set(key2(tagMember, m.GuildID, m.UserID), m)
	o.setRaw(key2(tagUserGuild, m.UserID, m.GuildID), nil)
	return s.apply(o, "put member")
}

// DeleteMember removes a membership; an unknown one is ErrNotFound.
func (s *Store) DeleteMember(ctx context.Context, guildID, userID snowflake.ID) error {
	return s.deleteKeys(ctx, fmt.Sprintf("member %v of guild %v", userID, guildID),
		key2(tagMember, guildID, userID), key2(tagUserGuild, userID, guildID))
}

// UserGuilds lists the guilds userID is a member of, ordered by id.
func (s *Store) UserGuilds(ctx context.Context, userID snowflake.ID) ([]snowflake.ID, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.end()
	var out []snowflake.ID
	err := s.scan(key1(tagUserGuild, userID), func(k, _ []byte) error {
		out = append(out, snowflake.ID(binary.BigEndian.Uint64(k[9:17])))
		return nil
	})
	return out, err
}

// PutInvite upserts an invite by code.
func (s *Store) PutInvite(ctx context.Context, inv store.Invite) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.end()
	if inv.Code == "" {
		return errors.New("pebble store: put invite: empty code")
	}
	s.metaMu.Lock()
	defer s.metaMu.Unlock()
	o := s.newOps()
	old, err := s.getInvite(inv.Code)
	switch {
	case err == nil:
		if old.GuildID != inv.GuildID {
			o.del(guildInviteKey(old.GuildID, inv.Code))
		}
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	o.set(inviteKey(inv.Code), inv)
	o.setRaw(guildInviteKey(inv.GuildID, inv.Code), nil)
	return s.apply(o, "put invite")
}

func (s *Store) getInvite(code string) (store.Invite, error) {
	var inv store.Invite
	err := s.get(inviteKey(code), fmt.Sprintf("invite %q", code),
		func(v []byte) error { return decodeJSON(v, &inv) })
	return inv, err
}

// GetInvite returns an invite by code.
func (s *Store) GetInvite(ctx context.Context, code string) (store.Invite, error) {
	if err := s.begin(ctx); err != nil {
		return store.Invite{}, err
	}
	defer s.end()
	return s.getInvite(code)
}

// DeleteInvite removes an invite; an unknown code is ErrNotFound.
func (s *Store) DeleteInvite(ctx context.Context, code string) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.end()
	s.metaMu.Lock()
	defer s.metaMu.Unlock()
	inv, err := s.getInvite(code)
	if err != nil {
		return err
	}
	o := s.newOps()
	o.del(inviteKey(code))
	o.del(guildInviteKey(inv.GuildID, code))
	return s.apply(o, "delete invite")
}
