package transport

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
)

// RememberFocus returns c with each session's latest op 14 channels per
// guild remembered on this gateway node and replayed to the guild's owner
// after every later Subscribe of that session to that guild.
//
// The owner keeps a session's op 14 state (its active channels, which
// decide what a passive session receives, and its member-list ranges) in
// the guild's actor. When the guild moves to another guild node the
// gateway subscribes its sessions again on the new owner, which starts
// with none of it, and the client does not know to send op 14 again: a
// person looking at a channel of a big guild would stop receiving its
// messages. The gateway is the one place that sees both the op 14 and the
// resubscription, so it keeps the last payload that named channels (one
// per session and guild, a few hundred bytes) until the session leaves
// the guild.
func RememberFocus(c GuildClient, log *slog.Logger) GuildClient {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &focusClient{GuildClient: c, log: log, last: make(map[focusKey]focusEntry)}
}

type focusKey struct {
	session event.SessionID
	guild   snowflake.ID
}

type focusEntry struct {
	payload json.RawMessage
	seq     uint64
}

type focusClient struct {
	GuildClient
	log *slog.Logger

	mu   sync.Mutex
	seq  uint64
	last map[focusKey]focusEntry
}

// namesChannels reports whether an op 14 payload carries "channels" (the
// active set it replaces); one that only asks for typing or threads does
// not change it.
func namesChannels(d json.RawMessage) bool {
	var p struct {
		Channels json.RawMessage `json:"channels"`
	}
	return json.Unmarshal(d, &p) == nil && len(p.Channels) > 0 && string(p.Channels) != "null"
}

// LazyRequest implements GuildBackend, remembering a payload that names
// channels once the owner took it.
func (f *focusClient) LazyRequest(ctx context.Context, guildID snowflake.ID, s event.Session, d json.RawMessage) error {
	if err := f.GuildClient.LazyRequest(ctx, guildID, s, d); err != nil {
		return err
	}
	if namesChannels(d) {
		f.mu.Lock()
		f.seq++
		f.last[focusKey{s.ID, guildID}] = focusEntry{payload: d, seq: f.seq}
		f.mu.Unlock()
	}
	return nil
}

// Subscribe implements GuildBackend: once the owner attached the session,
// it gets the session's latest op 14 again. An op 14 the client sends
// while the replay runs is replayed after it, so the owner ends with the
// latest.
func (f *focusClient) Subscribe(ctx context.Context, guildID snowflake.ID, s event.Session) error {
	if err := f.GuildClient.Subscribe(ctx, guildID, s); err != nil {
		return err
	}
	f.replayFocus(ctx, guildID, s)
	return nil
}

// SubscribeMoved implements GuildBackend, replaying the session's latest
// op 14 as Subscribe does.
func (f *focusClient) SubscribeMoved(ctx context.Context, guildID snowflake.ID, s event.Session, refresh bool) error {
	if err := f.GuildClient.SubscribeMoved(ctx, guildID, s, refresh); err != nil {
		return err
	}
	f.replayFocus(ctx, guildID, s)
	return nil
}

// replayFocus sends the owner the session's latest op 14 for guildID.
func (f *focusClient) replayFocus(ctx context.Context, guildID snowflake.ID, s event.Session) {
	k := focusKey{s.ID, guildID}
	var done uint64
	for {
		f.mu.Lock()
		e, ok := f.last[k]
		f.mu.Unlock()
		if !ok || e.seq == done {
			return
		}
		if err := f.GuildClient.LazyRequest(ctx, guildID, s, e.payload); err != nil {
			// The session is attached; only its focus is missing until
			// the client's next op 14.
			f.log.Info("op 14 not replayed after resubscribe", "session_id", s.ID, "guild_id", guildID, "err", err)
			return
		}
		done = e.seq
	}
}

// Disconnect implements GuildBackend, forgetting the session's op 14.
func (f *focusClient) Disconnect(ctx context.Context, guildID snowflake.ID, s event.Session) error {
	f.mu.Lock()
	delete(f.last, focusKey{s.ID, guildID})
	f.mu.Unlock()
	return f.GuildClient.Disconnect(ctx, guildID, s)
}
