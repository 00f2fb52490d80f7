package cassandra

import (
	"context"
	"fmt"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Webhooks and thread members (migration 5): JSON documents beside the
// key columns, like the rest of guild state. Adding and removing a thread
// member are lightweight transactions so the caller learns whether
// anything changed (THREAD_MEMBERS_UPDATE fires only then).

// PutWebhook implements store.Webhooks.
func (s *Store) PutWebhook(ctx context.Context, w store.Webhook) error {
	doc, err := encodeDoc(w)
	if err != nil {
		return err
	}
	b := s.logged(ctx)
	b.Query(`INSERT INTO webhooks (webhook_id, guild_id, doc) VALUES (?, ?, ?)`, int64(w.ID), int64(w.GuildID), doc)
	b.Query(`INSERT INTO guild_webhooks (guild_id, webhook_id) VALUES (?, ?)`, int64(w.GuildID), int64(w.ID))
	return execBatch(ctx, b, "put webhook")
}

// GetWebhook implements store.Webhooks.
func (s *Store) GetWebhook(ctx context.Context, id snowflake.ID) (store.Webhook, error) {
	var w store.Webhook
	err := s.getDoc(ctx, fmt.Sprintf("webhook %v", id), &w, `SELECT doc FROM webhooks WHERE webhook_id = ?`, int64(id))
	return w, err
}

// DeleteWebhook implements store.Webhooks.
func (s *Store) DeleteWebhook(ctx context.Context, id snowflake.ID) error {
	w, err := s.GetWebhook(ctx, id)
	if err != nil {
		return err
	}
	b := s.logged(ctx)
	b.Query(`DELETE FROM webhooks WHERE webhook_id = ?`, int64(id))
	b.Query(`DELETE FROM guild_webhooks WHERE guild_id = ? AND webhook_id = ?`, int64(w.GuildID), int64(id))
	return execBatch(ctx, b, "delete webhook")
}

// GuildWebhooks implements store.Webhooks.
func (s *Store) GuildWebhooks(ctx context.Context, guildID snowflake.ID) ([]store.Webhook, error) {
	ids, err := s.scanIDs(ctx, "guild webhooks", `SELECT webhook_id FROM guild_webhooks WHERE guild_id = ?`, int64(guildID))
	if err != nil {
		return nil, err
	}
	out := make([]store.Webhook, 0, len(ids))
	for _, id := range ids {
		w, err := s.GetWebhook(ctx, id)
		if err != nil {
			continue // deleted meanwhile
		}
		out = append(out, w)
	}
	return out, nil
}

// PutThreadMember implements store.ThreadMembers.
func (s *Store) PutThreadMember(ctx context.Context, m store.ThreadMember) (bool, error) {
	doc, err := encodeDoc(m)
	if err != nil {
		return false, err
	}
	applied, err := s.session.Query(`INSERT INTO thread_members (thread_id, user_id, doc) VALUES (?, ?, ?) IF NOT EXISTS`,
		int64(m.ThreadID), int64(m.UserID), doc).MapScanCASContext(ctx, map[string]any{})
	return applied, wrapErr("put thread member", err)
}

// DeleteThreadMember implements store.ThreadMembers.
func (s *Store) DeleteThreadMember(ctx context.Context, threadID, userID snowflake.ID) (bool, error) {
	applied, err := s.session.Query(`DELETE FROM thread_members WHERE thread_id = ? AND user_id = ? IF EXISTS`,
		int64(threadID), int64(userID)).MapScanCASContext(ctx, map[string]any{})
	return applied, wrapErr("delete thread member", err)
}

// ThreadMembers implements store.ThreadMembers.
func (s *Store) ThreadMembers(ctx context.Context, threadID snowflake.ID) ([]store.ThreadMember, error) {
	var out []store.ThreadMember
	err := s.scanDocs(ctx, "thread members", func(doc string) error {
		var m store.ThreadMember
		if err := decodeDoc(doc, &m); err != nil {
			return err
		}
		out = append(out, m)
		return nil
	}, `SELECT doc FROM thread_members WHERE thread_id = ?`, int64(threadID))
	return out, err
}
