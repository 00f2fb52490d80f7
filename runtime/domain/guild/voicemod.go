package guild

import (
	"context"
	"fmt"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/permissions"
)

// VoicePatch is the voice part of PATCH /guilds/{id}/members/{user}.
type VoicePatch struct {
	// Mute and Deaf set the member's server mute and deafen
	// (MUTE_MEMBERS, DEAFEN_MEMBERS).
	Mute, Deaf *bool
	// Move is set when the request named channel_id: Channel moves the
	// member to another voice channel, 0 disconnects it (MOVE_MEMBERS).
	Move    bool
	Channel snowflake.ID
}

// Empty reports whether p changes nothing.
func (p VoicePatch) Empty() bool { return p.Mute == nil && p.Deaf == nil && !p.Move }

// VoiceMember is a member's voice moderation state.
type VoiceMember struct {
	Mute, Deaf bool
}

// ModifyMember applies p to userID's voice state on behalf of
// actorID. Permissions are those of actorID in the channel the member is
// in (guild-wide when it is in none); a move also needs MOVE_MEMBERS and
// CONNECT in the destination. Moving a member that is in no voice channel
// fails with ErrNotInVoice.
func (vc *Voice) ModifyMember(ctx context.Context, actorID, guildID, userID snowflake.ID, p VoicePatch) (VoiceMember, error) {
	s := vc.s
	var out VoiceMember
	err := s.do(ctx, guildID, func(a *Actor) error {
		v := a.svc.voice.Load()
		if _, err := a.member(actorID); err != nil {
			return err
		}
		if _, ok := a.members[userID]; !ok {
			return fmt.Errorf("member %d: %w", userID, ErrUnknownMember)
		}
		vs := a.voiceState()
		if p.Empty() {
			out = VoiceMember{Mute: vs.mute[userID], Deaf: vs.deaf[userID]}
			return nil
		}
		st := vs.states[userID]
		where := func(need permissions.Bits) error {
			if st == nil {
				return a.guildPerms(actorID, need)
			}
			_, err := a.channelFor(actorID, st.channelID, need)
			return err
		}
		if p.Mute != nil {
			if err := where(permissions.MuteMembers); err != nil {
				return err
			}
		}
		if p.Deaf != nil {
			if err := where(permissions.DeafenMembers); err != nil {
				return err
			}
		}
		if p.Move {
			if st == nil || v == nil {
				return fmt.Errorf("move member %d: %w", userID, ErrNotInVoice)
			}
			if err := where(permissions.MoveMembers); err != nil {
				return err
			}
			if p.Channel != 0 {
				c := a.channels[p.Channel]
				if c == nil || (c.Type != store.ChannelVoice && c.Type != channelStage) {
					return fmt.Errorf("move member %d to %d: %w", userID, p.Channel, ErrUnknownChannel)
				}
				if _, err := a.channelFor(actorID, p.Channel, permissions.MoveMembers|permissions.Connect); err != nil {
					return err
				}
			}
		}
		if p.Mute != nil {
			vs.mute[userID] = *p.Mute
		}
		if p.Deaf != nil {
			vs.deaf[userID] = *p.Deaf
		}
		out = VoiceMember{Mute: vs.mute[userID], Deaf: vs.deaf[userID]}
		switch {
		case p.Move && p.Channel == 0:
			a.voiceLeave(ctx, v, st)
		case p.Move && p.Channel != st.channelID:
			return a.voiceMove(ctx, v, st, p.Channel)
		case st != nil && v != nil:
			if c, ok := v.Allocator.(VoiceControl); ok && st.server != "" {
				c.SetServerVoiceState(ctx, st.server, a.id, st.channelID, userID, out.Mute, out.Deaf)
			}
			a.dispatchVoiceState(ctx, st, st.channelID)
		}
		return nil
	})
	return out, err
}

// voiceMove moves st to channelID: the guild hears of it and the member's
// session gets a VOICE_SERVER_UPDATE for the new call, which the libraries
// follow by reconnecting.
func (a *Actor) voiceMove(ctx context.Context, v *voiceEnabled, st *voiceState, channelID snowflake.ID) error {
	node := ""
	if sub := a.subs[st.session]; sub != nil {
		node = sub.s.Node
	}
	srv, err := a.voiceServer(ctx, v, channelID, node)
	if err != nil {
		return err
	}
	a.voiceControlDisconnect(ctx, v, st)
	prev := st.channelID
	st.channelID, st.server = channelID, srv.ID
	a.dispatchVoiceState(ctx, st, prev)
	a.dropIdleCall(prev)
	v.joins.WithLabelValues("moved").Inc()
	sub := a.subs[st.session]
	if sub == nil {
		return nil
	}
	return a.sendVoiceServer(ctx, v, sub.s, st, srv)
}

// Regions lists the regions of the voice fleet (GET /voice/regions);
// empty when voice is off.
func (vc *Voice) Regions() []VoiceRegion {
	s := vc.s
	v := s.voice.Load()
	if v == nil {
		return nil
	}
	return v.Allocator.Regions()
}

// HomeRegion is this node's voice region (VoiceConfig.Region), the
// one GET /voice/regions marks optimal when the fleet has it; "" when
// unset or voice is off.
func (vc *Voice) HomeRegion() string {
	s := vc.s
	v := s.voice.Load()
	if v == nil {
		return ""
	}
	return v.Region
}
