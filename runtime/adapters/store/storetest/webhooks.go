package storetest

import (
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

func testWebhooks(t *testing.T, s store.Store) {
	t.Run("Webhooks", func(t *testing.T) {
		t.Parallel()
		ctx := ctxT(t)
		g, ch1, ch2 := rid(), rid(), rid()
		w1 := store.Webhook{ID: idAt(base, 1), GuildID: g, ChannelID: ch1, CreatorID: rid(), Type: store.WebhookIncoming,
			Name: "hook ☃", Avatar: "abc", TokenHash: []byte{1, 2, 3, 0, 255}, CreatedAt: ms(time.Now())}
		w2 := store.Webhook{ID: idAt(base, 2), GuildID: g, ChannelID: ch2, Type: store.WebhookIncoming, Name: "two", TokenHash: []byte{9}}
		noErr(t, "PutWebhook", s.PutWebhook(ctx, w2))
		noErr(t, "PutWebhook", s.PutWebhook(ctx, w1))
		got, err := s.GetWebhook(ctx, w1.ID)
		noErr(t, "GetWebhook", err)
		equal(t, "webhook", got, w1)
		list, err := s.GuildWebhooks(ctx, g)
		noErr(t, "GuildWebhooks", err)
		equal(t, "guild webhooks", list, []store.Webhook{w1, w2})
		// Moved to another channel and renamed: an upsert.
		w1.ChannelID, w1.Name = ch2, "moved"
		noErr(t, "PutWebhook move", s.PutWebhook(ctx, w1))
		got, err = s.GetWebhook(ctx, w1.ID)
		noErr(t, "GetWebhook moved", err)
		equal(t, "moved webhook", got, w1)

		noErr(t, "DeleteWebhook", s.DeleteWebhook(ctx, w2.ID))
		wantErr(t, "DeleteWebhook again", s.DeleteWebhook(ctx, w2.ID), store.ErrNotFound)
		_, err = s.GetWebhook(ctx, w2.ID)
		wantErr(t, "GetWebhook deleted", err, store.ErrNotFound)
		list, err = s.GuildWebhooks(ctx, g)
		noErr(t, "GuildWebhooks after delete", err)
		equal(t, "guild webhooks after delete", list, []store.Webhook{w1})
		list, err = s.GuildWebhooks(ctx, rid())
		noErr(t, "GuildWebhooks other guild", err)
		equal(t, "other guild", len(list), 0)
	})
	t.Run("ThreadMembers", func(t *testing.T) {
		t.Parallel()
		ctx := ctxT(t)
		th := rid()
		u1, u2 := snowflake.ID(10), snowflake.ID(20)
		m2 := store.ThreadMember{ThreadID: th, UserID: u2, JoinedAt: ms(time.Now()), Flags: 1}
		m1 := store.ThreadMember{ThreadID: th, UserID: u1, JoinedAt: ms(time.Now())}
		for _, m := range []store.ThreadMember{m2, m1} {
			added, err := s.PutThreadMember(ctx, m)
			noErr(t, "PutThreadMember", err)
			equal(t, "added", added, true)
		}
		added, err := s.PutThreadMember(ctx, m1)
		noErr(t, "PutThreadMember again", err)
		equal(t, "added again", added, false)
		list, err := s.ThreadMembers(ctx, th)
		noErr(t, "ThreadMembers", err)
		equal(t, "members", list, []store.ThreadMember{m1, m2})
		removed, err := s.DeleteThreadMember(ctx, th, u1)
		noErr(t, "DeleteThreadMember", err)
		equal(t, "removed", removed, true)
		removed, err = s.DeleteThreadMember(ctx, th, u1)
		noErr(t, "DeleteThreadMember again", err)
		equal(t, "removed again", removed, false)
		list, err = s.ThreadMembers(ctx, th)
		noErr(t, "ThreadMembers after", err)
		equal(t, "members after", list, []store.ThreadMember{m2})
	})
	t.Run("ThreadChannel", func(t *testing.T) {
		t.Parallel()
		ctx := ctxT(t)
		g := rid()
		noErr(t, "PutGuild", s.PutGuild(ctx, store.Guild{ID: g, Name: "g", OwnerID: rid()}))
		parent := store.Channel{ID: rid(), GuildID: g, Type: store.ChannelText, Name: "parent", Overwrites: []store.Overwrite{}, Recipients: []snowflake.ID{}}
		th := store.Channel{ID: rid(), GuildID: g, Type: store.ChannelPrivateThread, Name: "ticket", ParentID: parent.ID, OwnerID: rid(),
			Overwrites: []store.Overwrite{}, Recipients: []snowflake.ID{},
			Thread: &store.ThreadMeta{AutoArchiveDuration: 1440, ArchiveTimestamp: ms(time.Now()), Invitable: true, CreatedAt: ms(time.Now()), MessageCount: 3}}
		noErr(t, "PutChannel parent", s.PutChannel(ctx, parent))
		noErr(t, "PutChannel thread", s.PutChannel(ctx, th))
		got, err := s.GetChannel(ctx, th.ID)
		noErr(t, "GetChannel thread", err)
		equal(t, "thread", got, th)
	})
}
