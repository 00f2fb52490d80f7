package guild

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// countingSink counts deliveries and payload bytes, as a gateway touches
// them before writing.
type countingSink struct{ n, bytes atomic.Int64 }

func (c *countingSink) Deliver(_ context.Context, _ string, b event.Batch) {
	c.n.Add(int64(len(b.Targets)))
	for _, t := range b.Targets {
		c.bytes.Add(int64(len(b.Payloads[t.Variant])))
	}
}

// benchGuild builds a guild of members users, each with one session on one
// of 4 gateway nodes, and a message from the owner in its general channel.
func benchGuild(b *testing.B, members int) (*fixture, *countingSink, wire.Message) {
	return benchGuildWith(b, members, Config{})
}

// benchGuildWith is benchGuild on a service built with cfg.
func benchGuildWith(b *testing.B, members int, cfg Config) (*fixture, *countingSink, wire.Message) {
	b.Helper()
	sink := &countingSink{}
	f := newFixtureWithSink(b, sink)
	f.svc = f.newService(cfg)
	owner := f.user("owner", false)
	info := must[GuildInfo](b)(f.svc.CreateGuild(bg, owner.ID, "bench"))
	gid := info.Guild.ID
	for i := 0; i < members; i++ {
		u := f.user(fmt.Sprintf("u%d", i), i%10 == 0)
		if _, _, err := f.svc.Members.Add(bg, gid, u.ID); err != nil {
			b.Fatal(err)
		}
		s := event.Session{ID: event.SessionID(fmt.Sprintf("s%d", i)), UserID: u.ID, Bot: u.Bot,
			Intents: IntentGuilds | IntentGuildMessages, Node: fmt.Sprintf("node-%d", i%4)}
		if err := f.svc.Subscribe(bg, s); err != nil {
			b.Fatal(err)
		}
	}
	chans := must[[]store.Channel](b)(f.svc.Channels.List(bg, owner.ID, gid))
	// Every user session views the channel (op 14): in a guild above
	// large_threshold a session is otherwise passive there.
	for i := 0; i < members; i++ {
		s := event.Session{ID: event.SessionID(fmt.Sprintf("s%d", i)), Node: fmt.Sprintf("node-%d", i%4)}
		err := f.svc.do(bg, gid, func(a *Actor) error {
			if sub := a.subs[s.ID]; sub != nil && !sub.s.Bot {
				a.setActive(sub.s, []snowflake.ID{chans[0].ID})
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	grant := must[SendGrant](b)(f.svc.Messages.AuthorizeSend(bg, SendRequest{UserID: owner.ID, ChannelID: chans[0].ID}))
	m := store.Message{ID: snowflake.FromTime(time.Now()), ChannelID: chans[0].ID, GuildID: gid, AuthorID: owner.ID, Content: "benchmark message content of a typical length, say eighty characters."}
	return f, sink, wire.MessageFrom(m, wire.UserFrom(owner), grant.Member, nil, nil)
}

// BenchmarkFanoutMessage measures one MESSAGE_CREATE to every session of a
// guild through the actor: permission check per session, payload variants
// serialised once, one batch per node.
func BenchmarkFanoutMessage(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) { benchFanout(b, n, Config{}) })
	}
}

// BenchmarkFanoutShadow prices the permission shadow check on the fan-out
// path: off, the default 1 in 1000, and every decision recomputed.
func BenchmarkFanoutShadow(b *testing.B) {
	for _, every := range []int{-1, 1000, 1} {
		b.Run(fmt.Sprintf("every=%d", every), func(b *testing.B) { benchFanout(b, 1000, Config{ShadowEvery: every}) })
	}
}

// benchFanout publishes b.N messages to n sessions on a service built
// with cfg and reports the time per delivery.
func benchFanout(b *testing.B, n int, cfg Config) {
	f, sink, m := benchGuildWith(b, n, cfg)
	sink.n.Store(0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := f.svc.Messages.Publish(bg, "MESSAGE_CREATE", m); err != nil {
			b.Fatal(err)
		}
	}
	// Wait for the actor to drain the mailbox.
	if err := f.svc.do(bg, m.GuildID, func(*Actor) error { return nil }); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if got := sink.n.Load(); got != int64(b.N*n) {
		b.Fatalf("%d deliveries, want %d", got, b.N*n)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/delivery")
}

// BenchmarkFanoutNaive is the peer: the same recipients and checks, but the
// payload serialised and delivered per session, as a naive fan-out does.
func BenchmarkFanoutNaive(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			f, sink, m := benchGuild(b, n)
			sink.n.Store(0)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				err := f.svc.do(bg, m.GuildID, func(a *Actor) error {
					for _, sub := range a.subs {
						if !wants(sub.s, IntentGuildMessages) || !a.canView(sub.s.UserID, m.ChannelID) {
							continue
						}
						payload := m
						if sub.s.Bot && sub.s.Intents&IntentMessageContent == 0 {
							payload = wire.StripContent(m)
						}
						raw, _ := json.Marshal(payload)
						a.svc.deps.Sink.Deliver(bg, sub.s.Node, event.Batch{Type: "MESSAGE_CREATE", Payloads: []json.RawMessage{raw},
							Targets: []event.Target{{Session: sub.s.ID}}})
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if got := sink.n.Load(); got != int64(b.N*n) {
				b.Fatalf("%d deliveries, want %d", got, b.N*n)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/delivery")
		})
	}
}

// BenchmarkAuthorizeSend measures the actor round trip of the send check.
func BenchmarkAuthorizeSend(b *testing.B) {
	f, _, m := benchGuild(b, 10)
	ch := m.ChannelID
	owner := m.Author.ID
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := f.svc.Messages.AuthorizeSend(bg, SendRequest{UserID: owner, ChannelID: ch}); err != nil {
			b.Fatal(err)
		}
	}
}
