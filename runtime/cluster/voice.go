package cluster

import (
	"context"
	"log/slog"

	"github.com/concord-chat/concord/runtime/event"
	"github.com/concord-chat/concord/runtime/gateway"
	"github.com/concord-chat/concord/runtime/guild"
	"github.com/concord-chat/concord/runtime/transport"
	"github.com/concord-chat/concord/runtime/voicerole"
)

// withVoiceOp adds the gateway's op 4 handler: it forwards the op to the
// guild's owner, which decides and answers through the guild's events.
func withVoiceOp(ops map[int]gateway.OpHandler, guilds transport.GuildClient, log *slog.Logger) map[int]gateway.OpHandler {
	if ops == nil {
		ops = map[int]gateway.OpHandler{}
	}
	ops[gateway.OpVoiceStateUpdate] = gateway.VoiceStateHandler(func(ctx context.Context, s event.Session, u gateway.VoiceStateUpdate) error {
		err := guilds.UpdateVoiceState(ctx, s, guild.VoiceStateRequest{GuildID: u.GuildID, ChannelID: u.ChannelID, SelfMute: u.SelfMute, SelfDeaf: u.SelfDeaf})
		if err != nil {
			log.Info("op 4 not served by the guild owner", "guild_id", u.GuildID, "session_id", s.ID, "err", err)
		}
		return nil
	})
	return ops
}

// storeless reports whether a node runs only roles that keep nothing in
// the chat store (voice): it needs no shared store.
func storeless(c Config) bool {
	for _, r := range c.Roles {
		if r != voicerole.Name {
			return false
		}
	}
	return len(c.Roles) > 0
}
