package platform

import (
	"context"
	"fmt"

	"github.com/concord-chat/concord/runtime/event"
	"github.com/concord-chat/concord/runtime/gateway"
	"github.com/concord-chat/concord/runtime/guild"
)

// voiceStateHandler serves op 4 from the guild service.
func voiceStateHandler(guilds *guild.Service) gateway.OpHandler {
	return gateway.VoiceStateHandler(func(ctx context.Context, s event.Session, u gateway.VoiceStateUpdate) error {
		err := guilds.UpdateVoiceState(ctx, s, guild.VoiceStateRequest{GuildID: u.GuildID, ChannelID: u.ChannelID, SelfMute: u.SelfMute, SelfDeaf: u.SelfDeaf})
		if err != nil {
			return fmt.Errorf("platform: op 4: %w", err)
		}
		return nil
	})
}

// withVoice adds the op 4 handler to ops.
func withVoice(ops map[int]gateway.OpHandler, guilds *guild.Service) map[int]gateway.OpHandler {
	ops[gateway.OpVoiceStateUpdate] = voiceStateHandler(guilds)
	return ops
}
