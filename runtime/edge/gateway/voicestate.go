package gateway

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
)

// VoiceStateUpdate is op 4's payload: join (ChannelID set), move or leave
// (ChannelID 0, sent as null) a guild's voice channel.
type VoiceStateUpdate struct {
	GuildID   snowflake.ID
	ChannelID snowflake.ID
	SelfMute  bool
	SelfDeaf  bool
	SelfVideo bool
}

// errNoGuild is op 4 without a guild: Concord has no DM calls.
var errNoGuild = errors.New("gateway: op 4 without guild_id")

// ParseVoiceStateUpdate decodes op 4's d. Snowflakes may be strings or
// numbers (discord.py sends numbers); channel_id may be null.
func ParseVoiceStateUpdate(d json.RawMessage) (VoiceStateUpdate, error) {
	var raw struct {
		GuildID   snowflake.ID `json:"guild_id"`
		ChannelID snowflake.ID `json:"channel_id"`
		SelfMute  bool         `json:"self_mute"`
		SelfDeaf  bool         `json:"self_deaf"`
		SelfVideo bool         `json:"self_video"`
	}
	if err := json.Unmarshal(d, &raw); err != nil {
		return VoiceStateUpdate{}, err
	}
	if raw.GuildID == 0 {
		return VoiceStateUpdate{}, errNoGuild
	}
	return VoiceStateUpdate(raw), nil
}

// VoiceStateHandler serves op 4 with update, which carries it to the guild
// tier. A payload that does not decode closes with 4002; a join the guild
// refuses is only logged (Discord sends nothing back either).
func VoiceStateHandler(update func(ctx context.Context, s event.Session, u VoiceStateUpdate) error) OpHandler {
	return OpHandlerFunc(func(ctx context.Context, s event.Session, _ int, d json.RawMessage) error {
		u, err := ParseVoiceStateUpdate(d)
		if err != nil {
			return &CloseError{Code: CloseDecodeError, Reason: "bad op 4"}
		}
		return update(ctx, s, u)
	})
}
