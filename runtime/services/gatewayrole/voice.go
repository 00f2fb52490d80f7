package gatewayrole

import (
	"context"
	"log/slog"

	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/edge/gateway"
)

// voiceGuilds is where op 4 goes: the process's guild service in
// `concord dev`, the guild's owner over GuildNode in `concord serve`.
type voiceGuilds interface {
	UpdateVoiceState(ctx context.Context, s event.Session, req guild.VoiceStateRequest) error
}

// voiceStateHandler is the gateway's op 4 handler: the guild decides
// (VIEW_CHANNEL, CONNECT, the user limit) and answers through its
// events, so a refusal is only logged here.
func voiceStateHandler(guilds voiceGuilds, log *slog.Logger) gateway.OpHandler {
	return gateway.VoiceStateHandler(func(ctx context.Context, s event.Session, u gateway.VoiceStateUpdate) error {
		err := guilds.UpdateVoiceState(ctx, s, guild.VoiceStateRequest{GuildID: u.GuildID, ChannelID: u.ChannelID, SelfMute: u.SelfMute, SelfDeaf: u.SelfDeaf})
		if err != nil {
			log.Info("op 4 not served by the guild", "guild_id", u.GuildID, "session_id", s.ID, "err", err)
		}
		return nil
	})
}
