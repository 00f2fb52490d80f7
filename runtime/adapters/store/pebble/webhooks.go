package pebble

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Webhooks and thread members (keys.go lists the tags):
//
//	'w' webhook        -> webhook (JSON)
//	'W' guild webhook  -> (empty) guild -> webhooks index
//	'T' thread user    -> thread member (JSON)

// PutWebhook implements store.Webhooks.
func (s *Store) PutWebhook(ctx context.Context, w store.Webhook) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.end()
	v, err := encodeJSON(w)
	if err != nil {
		return err
	}
	b := s.db.NewBatch()
	_ = b.Set(key1(tagWebhook, w.ID), v, nil)
	_ = b.Set(key2(tagGuildWebhook, w.GuildID, w.ID), nil, nil)
	return s.commit(b, "put webhook")
}

// GetWebhook implements store.Webhooks.
func (s *Store) GetWebhook(ctx context.Context, id snowflake.ID) (store.Webhook, error) {
	if err := s.begin(ctx); err != nil {
		return store.Webhook{}, err
	}
	defer s.end()
	var out store.Webhook
	err := s.get(key1(tagWebhook, id), fmt.Sprintf("webhook %v", id), func(v []byte) error {
		return decodeJSON(v, &out)
	})
	return out, err
}

// DeleteWebhook implements store.Webhooks.
func (s *Store) DeleteWebhook(ctx context.Context, id snowflake.ID) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.end()
	s.metaMu.Lock()
	defer s.metaMu.Unlock()
	var w store.Webhook
	if err := s.get(key1(tagWebhook, id), fmt.Sprintf("webhook %v", id), func(v []byte) error {
		return decodeJSON(v, &w)
	}); err != nil {
		return err
	}
	b := s.db.NewBatch()
	_ = b.Delete(key1(tagWebhook, id), nil)
	_ = b.Delete(key2(tagGuildWebhook, w.GuildID, id), nil)
	return s.commit(b, "delete webhook")
}

// GuildWebhooks implements store.Webhooks.
func (s *Store) GuildWebhooks(ctx context.Context, guildID snowflake.ID) ([]store.Webhook, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.end()
	var ids []snowflake.ID
	if err := s.scan(key1(tagGuildWebhook, guildID), func(k, _ []byte) error {
		ids = append(ids, snowflake.ID(binary.BigEndian.Uint64(k[9:17])))
		return nil
	}); err != nil {
		return nil, err
	}
	out := make([]store.Webhook, 0, len(ids))
	for _, id := range ids {
		var w store.Webhook
		err := s.get(key1(tagWebhook, id), fmt.Sprintf("webhook %v", id), func(v []byte) error {
			return decodeJSON(v, &w)
		})
		if err != nil {
			continue // deleted meanwhile
		}
		out = append(out, w)
	}
	return out, nil
}

// PutThreadMember implements store.ThreadMembers.
func (s *Store) PutThreadMember(ctx context.Context, m store.ThreadMember) (bool, error) {
	if err := s.begin(ctx); err != nil {
		return false, err
	}
	defer s.end()
	l := s.chLock(m.ThreadID)
	l.Lock()
	defer l.Unlock()
	k := key2(tagThreadMember, m.ThreadID, m.UserID)
	ok, err := s.exists(k)
	if err != nil || ok {
		return false, err
	}
	v, err := encodeJSON(m)
	if err != nil {
		return false, err
	}
	b := s.db.NewBatch()
	_ = b.Set(k, v, nil)
	return true, s.commit(b, "put thread member")
}

// DeleteThreadMember implements store.ThreadMembers.
func (s *Store) DeleteThreadMember(ctx context.Context, threadID, userID snowflake.ID) (bool, error) {
	if err := s.begin(ctx); err != nil {
		return false, err
	}
	defer s.end()
	l := s.chLock(threadID)
	l.Lock()
	defer l.Unlock()
	k := key2(tagThreadMember, threadID, userID)
	ok, err := s.exists(k)
	if err != nil || !ok {
		return false, err
	}
	b := s.db.NewBatch()
	_ = b.Delete(k, nil)
	return true, s.commit(b, "delete thread member")
}

// ThreadMembers implements store.ThreadMembers.
func (s *Store) ThreadMembers(ctx context.Context, threadID snowflake.ID) ([]store.ThreadMember, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.end()
	var out []store.ThreadMember
	err := s.scan(key1(tagThreadMember, threadID), func(_, v []byte) error {
		var m store.ThreadMember
		if err := decodeJSON(v, &m); err != nil {
			return err
		}
		out = append(out, m)
		return nil
	})
	return out, err
}
