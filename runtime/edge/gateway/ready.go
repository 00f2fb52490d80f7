package gateway

import (
	"encoding/json"
	"fmt"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
)

// readyGuild is a guild in READY: always unavailable until its GUILD_CREATE.
type readyGuild struct {
	ID          snowflake.ID `json:"id"`
	Unavailable bool         `json:"unavailable"`
}

// readyApplication is READY's `application`.
type readyApplication struct {
	ID    snowflake.ID `json:"id"`
	Flags int          `json:"flags"`
}

// readyPayload is READY's `d`, with every field discordgo, discord.js and
// discord.py read.
type readyPayload struct {
	V                    int              `json:"v"`
	User                 json.RawMessage  `json:"user"`
	Guilds               []readyGuild     `json:"guilds"`
	SessionID            event.SessionID  `json:"session_id"`
	SessionType          string           `json:"session_type"`
	ResumeGatewayURL     string           `json:"resume_gateway_url"`
	Shard                *[2]int          `json:"shard,omitempty"`
	Application          readyApplication `json:"application"`
	PrivateChannels      json.RawMessage  `json:"private_channels"`
	ReadState            json.RawMessage  `json:"read_state,omitempty"`
	Relationships        []struct{}       `json:"relationships"`
	UserSettings         struct{}         `json:"user_settings"`
	Presences            []struct{}       `json:"presences"`
	GuildJoinRequests    []struct{}       `json:"guild_join_requests"`
	GeoOrderedRTCRegions []string         `json:"geo_ordered_rtc_regions"`
	Trace                []string         `json:"_trace"`
}

// buildReady serialises READY's `d` for a session that identified.
func buildReady(r event.Ready, s event.Session, hasShard bool, apiVersion int, resumeURL string) ([]byte, error) {
	p := readyPayload{
		V:                    apiVersion,
		User:                 r.User,
		Guilds:               make([]readyGuild, len(r.Guilds)),
		SessionID:            s.ID,
		SessionType:          "normal",
		ResumeGatewayURL:     resumeURL,
		Application:          readyApplication{ID: r.ApplicationID, Flags: r.ApplicationFlags},
		PrivateChannels:      r.PrivateChannels,
		ReadState:            r.ReadState,
		Relationships:        []struct{}{},
		Presences:            []struct{}{},
		GuildJoinRequests:    []struct{}{},
		GeoOrderedRTCRegions: []string{},
		Trace:                []string{"concord-gateway"},
	}
	for i, g := range r.Guilds {
		p.Guilds[i] = readyGuild{ID: g, Unavailable: true}
	}
	if len(p.User) == 0 {
		u, err := json.Marshal(map[string]any{
			"id": r.UserID, "username": r.UserID.String(), "discriminator": "0",
			"global_name": nil, "avatar": nil, "bot": r.Bot,
		})
		if err != nil {
			return nil, fmt.Errorf("gateway: ready user: %w", err)
		}
		p.User = u
	}
	if len(p.PrivateChannels) == 0 || string(p.PrivateChannels) == "null" {
		p.PrivateChannels = json.RawMessage("[]")
	}
	if p.Application.ID == 0 {
		// A bot's application id is its user id unless told otherwise.
		p.Application.ID = r.UserID
	}
	if hasShard {
		p.Shard = &[2]int{s.ShardID, s.ShardCount}
	}
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("gateway: ready: %w", err)
	}
	return b, nil
}
