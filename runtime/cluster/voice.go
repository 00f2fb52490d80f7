package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/concord-chat/concord/runtime/event"
	"github.com/concord-chat/concord/runtime/gateway"
	"github.com/concord-chat/concord/runtime/guild"
	"github.com/concord-chat/concord/runtime/lifecycle"
	"github.com/concord-chat/concord/runtime/transport"
	"github.com/concord-chat/concord/runtime/voice/fleet"
	"github.com/concord-chat/concord/runtime/voicerole"
)

// enableVoice turns voice channels on in the node's guild service: calls
// are placed on the SFUs (--roles=voice nodes) whose load reports the
// registry holds, and tokens are signed with the cluster's voice key.
func (n *Node) enableVoice(cfg Config) error {
	key, err := voicerole.SigningKey(cfg, false)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	f := fleet.NewRegistry(n.reg, fleet.RegistryConfig{Logger: n.log.With("component", "voice-fleet")})
	n.voiceFleet = f
	if err := n.guilds.EnableVoice(guild.VoiceConfig{Allocator: f, Key: key}); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	return n.group.Add(lifecycle.Part{Name: "guild/voice-fleet", Run: f.Run})
}

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

// isVoiceRefusal reports a join the guild refused (permissions, a full or
// unknown channel): answered, not a failure of the owner.
func isVoiceRefusal(err error) bool {
	for _, e := range []error{guild.ErrMissingPermissions, guild.ErrMissingAccess, guild.ErrUnknownChannel} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
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
