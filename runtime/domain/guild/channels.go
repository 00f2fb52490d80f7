package guild

import (
	"context"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/permissions"
)

// ChannelSpec describes a new guild channel.
type ChannelSpec struct {
	Name             string
	Type             int // store.ChannelText, ChannelVoice or ChannelCategory
	Topic            string
	Position         *int
	ParentID         snowflake.ID
	NSFW             bool
	RateLimitPerUser int
	Bitrate          int
	UserLimit        int
	Overwrites       []store.Overwrite
	// AvailableTags are a forum's tags, with their ids minted.
	AvailableTags []store.ForumTag
	// RTCRegion is a voice channel's region id; empty is automatic.
	RTCRegion string
}

// ChannelPatch changes a guild channel; nil fields stay. ParentID points
// at 0 to remove the parent.
type ChannelPatch struct {
	Name             *string
	Topic            *string
	Position         *int
	ParentID         *snowflake.ID
	NSFW             *bool
	RateLimitPerUser *int
	Bitrate          *int
	UserLimit        *int
	Overwrites       *[]store.Overwrite
	// AvailableTags replaces a forum's tags.
	AvailableTags *[]store.ForumTag
	// RTCRegion sets a voice channel's region id; empty is automatic.
	RTCRegion *string
}

// maxSlowmode is Discord's limit for rate_limit_per_user: six hours.
const maxSlowmode = 21600

func (a *Actor) validateChannel(c store.Channel) error {
	if n := utf8.RuneCountInString(c.Name); n < 1 || n > 100 {
		return fmt.Errorf("channel name length %d: %w", n, ErrInvalid)
	}
	switch c.Type {
	case store.ChannelText, store.ChannelVoice, store.ChannelCategory, store.ChannelForum:
	default:
		return fmt.Errorf("channel type %d: %w", c.Type, ErrInvalid)
	}
	if c.Type != store.ChannelForum && len(c.AvailableTags) > 0 {
		return fmt.Errorf("available tags on channel type %d: %w", c.Type, ErrInvalid)
	}
	if err := validateForumTags(c.AvailableTags); err != nil {
		return err
	}
	if c.RateLimitPerUser < 0 || c.RateLimitPerUser > maxSlowmode {
		return fmt.Errorf("rate_limit_per_user %d: %w", c.RateLimitPerUser, ErrInvalid)
	}
	if utf8.RuneCountInString(c.Topic) > 1024 {
		return fmt.Errorf("topic too long: %w", ErrInvalid)
	}
	if c.ParentID != 0 {
		p, ok := a.channels[c.ParentID]
		if !ok || p.Type != store.ChannelCategory || c.Type == store.ChannelCategory || p.ID == c.ID {
			return fmt.Errorf("parent %d: %w", c.ParentID, ErrInvalid)
		}
	}
	for _, o := range c.Overwrites {
		if o.Type != store.OverwriteRole && o.Type != store.OverwriteMember {
			return fmt.Errorf("overwrite type %d: %w", o.Type, ErrInvalid)
		}
		if o.Type == store.OverwriteRole {
			if _, ok := a.roles[o.ID]; !ok {
				return fmt.Errorf("overwrite role %d: %w", o.ID, ErrUnknownRole)
			}
		}
	}
	return nil
}

// putChannel writes a channel through and applies it, then tells sessions.
func (a *Actor) putChannel(ctx context.Context, c store.Channel) error {
	if err := a.svc.deps.Store.PutChannel(ctx, c); err != nil {
		return storeErr("put channel", err)
	}
	if old, ok := a.channels[c.ID]; ok {
		c.LastMessageID = max(c.LastMessageID, old.LastMessageID)
	}
	a.channels[c.ID] = &c
	a.engine.SetOverwrites(c.ID, engineOverwrites(c.Overwrites))
	a.svc.channelGuild.Store(c.ID, a.id)
	return nil
}

// Channels is the channels seam of a Service (Service.Channels):
// creating, changing and deleting a guild's channels, their permission
// overwrites, the channel list, and the decisions and event of the
// channels' webhooks (webhooks.go). It holds the host, whose guild actors
// keep the channels; threads are the threads seam's.
type Channels struct {
	s *Service
}

// Create creates a guild channel (MANAGE_CHANNELS; overwrites go
// through the grant check: MANAGE_ROLES and every bit they allow or deny,
// held in the parent category or else at guild level) and sends CHANNEL_CREATE to the sessions that see it.
func (cs *Channels) Create(ctx context.Context, userID, guildID snowflake.ID, spec ChannelSpec) (store.Channel, error) {
	s := cs.s
	id, err := s.deps.IDs.Next()
	if err != nil {
		return store.Channel{}, fmt.Errorf("create channel: %w: %w", ErrUnavailable, err)
	}
	var out store.Channel
	err = s.do(ctx, guildID, func(a *Actor) error {
		if err := a.guildPerms(userID, permissions.ManageChannels); err != nil {
			return err
		}
		c := store.Channel{
			ID: id, GuildID: a.id, Type: spec.Type, Name: spec.Name, Topic: spec.Topic,
			ParentID: spec.ParentID, NSFW: spec.NSFW, RateLimitPerUser: spec.RateLimitPerUser,
			Bitrate: spec.Bitrate, UserLimit: spec.UserLimit, Overwrites: slices.Clone(spec.Overwrites),
			AvailableTags: slices.Clone(spec.AvailableTags), RTCRegion: spec.RTCRegion,
		}
		if c.Overwrites == nil {
			c.Overwrites = []store.Overwrite{}
		}
		if spec.Position != nil {
			c.Position = *spec.Position
		} else {
			for _, o := range a.channels {
				if o.Position >= c.Position {
					c.Position = o.Position + 1
				}
			}
		}
		if err := a.validateChannel(c); err != nil {
			return err
		}
		// The actor's permissions are those of the parent category, or
		// the guild's: the new channel's overwrites cannot vouch for
		// themselves.
		if len(c.Overwrites) > 0 {
			if err := a.overwriteGrant(userID, c.ParentID, c.ParentID, nil, c.Overwrites); err != nil {
				return err
			}
		}
		if err := a.putChannel(ctx, c); err != nil {
			return err
		}
		out = cloneChannel(c)
		a.syncVisibility(ctx, map[snowflake.ID]bool{c.ID: true}, nil, 0)
		return nil
	})
	return out, err
}

// Modify patches a guild channel (MANAGE_CHANNELS in it; new
// overwrites go through the grant check in this channel) and tells each session about the channel
// appearing, changing or disappearing for it.
func (cs *Channels) Modify(ctx context.Context, userID, channelID snowflake.ID, p ChannelPatch) (store.Channel, error) {
	s := cs.s
	guildID, err := s.guildOf(ctx, channelID)
	if err != nil {
		return store.Channel{}, err
	}
	var out store.Channel
	err = s.do(ctx, guildID, func(a *Actor) error {
		v, err := a.channelFor(userID, channelID, permissions.ManageChannels)
		if err != nil {
			return err
		}
		c := v.Channel
		if p.Name != nil {
			c.Name = *p.Name
		}
		if p.Topic != nil {
			c.Topic = *p.Topic
		}
		if p.Position != nil {
			c.Position = *p.Position
		}
		if p.ParentID != nil {
			c.ParentID = *p.ParentID
		}
		if p.NSFW != nil {
			c.NSFW = *p.NSFW
		}
		if p.RateLimitPerUser != nil {
			c.RateLimitPerUser = *p.RateLimitPerUser
		}
		if p.Bitrate != nil {
			c.Bitrate = *p.Bitrate
		}
		if p.UserLimit != nil {
			c.UserLimit = *p.UserLimit
		}
		if p.Overwrites != nil {
			c.Overwrites = slices.Clone(*p.Overwrites)
			if c.Overwrites == nil {
				c.Overwrites = []store.Overwrite{}
			}
		}
		if p.AvailableTags != nil {
			c.AvailableTags = slices.Clone(*p.AvailableTags)
		}
		if p.RTCRegion != nil {
			c.RTCRegion = *p.RTCRegion
		}
		if err := a.validateChannel(c); err != nil {
			return err
		}
		if p.Overwrites != nil {
			if err := a.overwriteGrant(userID, channelID, v.Channel.ParentID, v.Channel.Overwrites, c.Overwrites); err != nil {
				return err
			}
		}
		if err := a.putChannel(ctx, c); err != nil {
			return err
		}
		out = cloneChannel(*a.channels[c.ID])
		a.syncVisibility(ctx, map[snowflake.ID]bool{c.ID: true}, nil, 0)
		a.voiceRegionChanged(ctx, v.Channel.RTCRegion, c)
		return nil
	})
	return out, err
}

// PutOverwrite sets one overwrite of a channel: the grant check, in that
// channel, of MANAGE_ROLES and every bit the overwrite changes.
func (cs *Channels) PutOverwrite(ctx context.Context, userID, channelID snowflake.ID, o store.Overwrite) error {
	s := cs.s
	return s.editOverwrites(ctx, userID, channelID, func(ows []store.Overwrite) []store.Overwrite {
		ows = slices.DeleteFunc(ows, func(x store.Overwrite) bool { return x.ID == o.ID })
		return append(ows, o)
	})
}

// DeleteOverwrite removes a channel's overwrite for targetID under the
// same check (removing an overwrite changes every bit it held).
func (cs *Channels) DeleteOverwrite(ctx context.Context, userID, channelID, targetID snowflake.ID) error {
	s := cs.s
	return s.editOverwrites(ctx, userID, channelID, func(ows []store.Overwrite) []store.Overwrite {
		return slices.DeleteFunc(ows, func(x store.Overwrite) bool { return x.ID == targetID })
	})
}

func (s *Service) editOverwrites(ctx context.Context, userID, channelID snowflake.ID, edit func([]store.Overwrite) []store.Overwrite) error {
	guildID, err := s.guildOf(ctx, channelID)
	if err != nil {
		return err
	}
	return s.do(ctx, guildID, func(a *Actor) error {
		v, err := a.channelFor(userID, channelID, 0)
		if err != nil {
			return err
		}
		c := v.Channel
		c.Overwrites = edit(slices.Clone(c.Overwrites))
		if err := a.validateChannel(c); err != nil {
			return err
		}
		if err := a.overwriteGrant(userID, channelID, v.Channel.ParentID, v.Channel.Overwrites, c.Overwrites); err != nil {
			return err
		}
		if err := a.putChannel(ctx, c); err != nil {
			return err
		}
		a.syncVisibility(ctx, map[snowflake.ID]bool{c.ID: true}, nil, 0)
		return nil
	})
}

// Delete deletes a guild channel (MANAGE_CHANNELS in it) and its
// threads, which it returns too. Children of a deleted category lose
// their parent.
func (cs *Channels) Delete(ctx context.Context, userID, channelID snowflake.ID) (store.Channel, []store.Channel, error) {
	s := cs.s
	guildID, err := s.guildOf(ctx, channelID)
	if err != nil {
		return store.Channel{}, nil, err
	}
	var out store.Channel
	var threads []store.Channel
	err = s.do(ctx, guildID, func(a *Actor) error {
		v, err := a.channelFor(userID, channelID, permissions.ManageChannels)
		if err != nil {
			return err
		}
		updated := make(map[snowflake.ID]bool)
		deleted := map[snowflake.ID]store.Channel{channelID: v.Channel}
		if err := a.dropThreadsOf(ctx, channelID, deleted); err != nil {
			return err
		}
		for _, child := range a.channels {
			if child.ParentID == channelID {
				c := cloneChannel(*child)
				c.ParentID = 0
				if err := a.putChannel(ctx, c); err != nil {
					return err
				}
				updated[c.ID] = true
			}
		}
		if err := a.svc.deps.Store.DeleteChannel(ctx, channelID); err != nil {
			return storeErr("delete channel", err)
		}
		a.voiceChannelGone(ctx, channelID)
		delete(a.channels, channelID)
		a.engine.DeleteChannel(channelID)
		a.svc.channelGuild.Delete(channelID)
		for k := range a.slow {
			if k.channel == channelID {
				delete(a.slow, k)
			}
		}
		out = v.Channel
		for id, c := range deleted {
			if id != channelID {
				threads = append(threads, c)
			}
		}
		a.syncVisibility(ctx, updated, deleted, 0)
		return nil
	})
	return out, threads, err
}

// guildOf returns the guild of a guild channel; private channels are
// ErrUnknownChannel here.
func (s *Service) guildOf(ctx context.Context, channelID snowflake.ID) (snowflake.ID, error) {
	g, err := s.ChannelGuild(ctx, channelID)
	if err != nil {
		return 0, err
	}
	if g == 0 {
		return 0, fmt.Errorf("channel %d is private: %w", channelID, ErrMissingPermissions)
	}
	return g, nil
}
