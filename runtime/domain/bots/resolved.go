package bots

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/permissions"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// Option types that reference objects.
const (
	optionSubcommand      = 1
	optionSubcommandGroup = 2
	optionUser            = 6
	optionChannel         = 7
	optionRole            = 8
	optionMentionable     = 9
)

// resolved is data.resolved of a command interaction: every user, member,
// role and channel an option names, shaped as the libraries read them.
type resolved struct {
	Users    map[snowflake.ID]wire.User      `json:"users,omitempty"`
	Members  map[snowflake.ID]wire.Member    `json:"members,omitempty"`
	Roles    map[snowflake.ID]wire.Role      `json:"roles,omitempty"`
	Channels map[snowflake.ID]map[string]any `json:"channels,omitempty"`
}

func (r *resolved) empty() bool {
	return len(r.Users)+len(r.Members)+len(r.Roles)+len(r.Channels) == 0
}

// resolveOptions fills data.resolved for the options of an invocation by
// invoker in channelID. A channel option must name a channel of the guild
// the invoker sees (a forged id never reveals a hidden channel's name);
// a user option may name a non-member (users without members); role and
// mentionable options name a role of the guild or a user.
func (h *Handler) resolveOptions(ctx context.Context, invoker, guildID, channelID snowflake.ID, given []json.RawMessage, path string, out *resolved) error {
	var roles map[snowflake.ID]wire.Role
	loadRoles := func() error {
		if roles != nil {
			return nil
		}
		list, err := h.deps.Guilds.Roles(ctx, invoker, guildID)
		if err != nil {
			return err
		}
		roles = make(map[snowflake.ID]wire.Role, len(list))
		for _, r := range list {
			roles[r.ID] = r
		}
		return nil
	}
	var walk func(given []json.RawMessage, path string) error
	walk = func(given []json.RawMessage, path string) error {
		for i, raw := range given {
			p := join(path, fmt.Sprint(i))
			var g givenOption
			if err := json.Unmarshal(raw, &g); err != nil {
				return FormError(p, "BASE_TYPE_BAD_TYPE", "Option must be an object.")
			}
			if g.Type == optionSubcommand || g.Type == optionSubcommandGroup {
				if err := walk(g.Options, join(p, "options")); err != nil {
					return err
				}
				continue
			}
			if g.Type < optionUser || g.Type > optionMentionable || g.Focused {
				continue
			}
			var id snowflake.ID
			if err := id.UnmarshalJSON(g.Value); err != nil || id == 0 {
				return FormError(join(p, "value"), "NUMBER_TYPE_COERCE", "Value is not a snowflake.")
			}
			switch g.Type {
			case optionUser:
				if err := h.resolveUser(ctx, guildID, channelID, id, out); err != nil {
					if errors.Is(err, ErrUnavailable) {
						return err
					}
					return FormError(join(p, "value"), "APPLICATION_COMMAND_OPTION_USER_UNKNOWN", "Unknown user.")
				}
			case optionChannel:
				if err := h.resolveChannel(ctx, invoker, guildID, id, out); err != nil {
					if errors.Is(err, ErrUnavailable) {
						return err
					}
					return FormError(join(p, "value"), "APPLICATION_COMMAND_OPTION_CHANNEL_UNKNOWN", "Unknown channel.")
				}
			case optionRole, optionMentionable:
				if err := loadRoles(); err != nil {
					return err
				}
				if r, ok := roles[id]; ok {
					if out.Roles == nil {
						out.Roles = map[snowflake.ID]wire.Role{}
					}
					out.Roles[id] = r
					continue
				}
				if g.Type == optionRole || h.resolveUser(ctx, guildID, channelID, id, out) != nil {
					return FormError(join(p, "value"), "APPLICATION_COMMAND_OPTION_ROLE_UNKNOWN", "Unknown role.")
				}
			}
		}
		return nil
	}
	return walk(given, path)
}

// resolveUser adds a user and, when they are a member, their member
// object (without user, with their permissions in the channel).
func (h *Handler) resolveUser(ctx context.Context, guildID, channelID, id snowflake.ID, out *resolved) error {
	if out.Users == nil {
		out.Users = map[snowflake.ID]wire.User{}
	}
	m, err := h.deps.Guilds.Member(ctx, guildID, id)
	if err == nil && m.User != nil {
		out.Users[id] = *m.User
		m.User = nil
		if p, err := h.deps.Guilds.ChannelPermissions(ctx, id, channelID); err == nil {
			b := wire.Bits(p)
			m.Permissions = &b
		}
		if out.Members == nil {
			out.Members = map[snowflake.ID]wire.Member{}
		}
		out.Members[id] = m
		return nil
	}
	u, err := h.deps.Guilds.User(ctx, id)
	if err != nil {
		return err
	}
	out.Users[id] = u
	return nil
}

// resolveChannel adds a channel of the guild that the invoker sees, with
// the invoker's permissions in it.
func (h *Handler) resolveChannel(ctx context.Context, invoker, guildID, id snowflake.ID, out *resolved) error {
	c, err := h.deps.Guilds.Channel(ctx, id)
	if err != nil {
		return err
	}
	if c.GuildID != guildID {
		return ErrUnknownChannel
	}
	p, err := h.deps.Guilds.ChannelPermissions(ctx, invoker, id)
	if err != nil {
		return err
	}
	if !p.Has(permissions.ViewChannel) {
		return ErrUnknownChannel
	}
	raw, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("encode channel: %w", err)
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return fmt.Errorf("encode channel: %w", err)
	}
	obj["permissions"] = wire.Bits(p)
	if out.Channels == nil {
		out.Channels = map[snowflake.ID]map[string]any{}
	}
	out.Channels[id] = obj
	return nil
}

// withResolved adds data.resolved to a command's data when its options
// reference users, members, roles or channels.
func (h *Handler) withResolved(ctx context.Context, invoker, guildID, channelID snowflake.ID, data json.RawMessage) (json.RawMessage, error) {
	var d map[string]json.RawMessage
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("decode command data: %w", err)
	}
	var opts []json.RawMessage
	if raw, ok := d["options"]; ok {
		if err := json.Unmarshal(raw, &opts); err != nil {
			return nil, FormError("data.options", "BASE_TYPE_LIST", "Must be an array.")
		}
	}
	var res resolved
	if err := h.resolveOptions(ctx, invoker, guildID, channelID, opts, "data.options", &res); err != nil {
		return nil, err
	}
	if res.empty() {
		return data, nil
	}
	b, err := json.Marshal(res)
	if err != nil {
		return nil, fmt.Errorf("encode resolved: %w", err)
	}
	d["resolved"] = b
	return json.Marshal(d)
}
