package memberlist

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Request is a client's op 14 (lazy guild request):
// `{"guild_id","channels":{"<channel id>":[[0,99],[100,199]]},"typing",
// "activities","threads","members":[...]}`.
type Request struct {
	GuildID snowflake.ID
	// Channels maps each channel to the ranges the client shows; nil when
	// the request has no channels (it may only toggle typing or
	// activities), empty when it sent an empty object.
	Channels map[snowflake.ID][]Range
	Typing   bool
	// Activities, Threads and Members are accepted and reported but not
	// acted on by this package.
	Activities bool
	Threads    bool
	Members    []snowflake.ID
}

// ParseRequest decodes an op 14 `d`. Snowflakes may be strings or
// numbers. A channel key that is not a snowflake or a range that is not a
// pair of integers fails with ErrBadRequest (the gateway closes with 4002);
// limits (channels, ranges, widths) are applied by Guild.Subscribe.
func ParseRequest(d json.RawMessage) (Request, error) {
	var raw struct {
		GuildID    snowflake.ID               `json:"guild_id"`
		Channels   map[string]json.RawMessage `json:"channels"`
		Typing     bool                       `json:"typing"`
		Activities bool                       `json:"activities"`
		Threads    bool                       `json:"threads"`
		Members    []snowflake.ID             `json:"members"`
	}
	if err := json.Unmarshal(d, &raw); err != nil {
		return Request{}, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	if raw.GuildID == 0 {
		return Request{}, fmt.Errorf("%w: no guild_id", ErrBadRequest)
	}
	r := Request{GuildID: raw.GuildID, Typing: raw.Typing, Activities: raw.Activities, Threads: raw.Threads, Members: raw.Members}
	if raw.Channels != nil {
		// An empty object is kept apart from no object: it names no
		// channel, which leaves a passive session fully passive.
		r.Channels = make(map[snowflake.ID][]Range, len(raw.Channels))
	}
	for k, v := range raw.Channels {
		ch, err := snowflake.Parse(k)
		if err != nil {
			return Request{}, fmt.Errorf("%w: channel %.24q", ErrBadRequest, k)
		}
		var pairs [][]int
		if err := json.Unmarshal(v, &pairs); err != nil {
			return Request{}, fmt.Errorf("%w: channel %s ranges: %w", ErrBadRequest, ch, err)
		}
		rs := make([]Range, 0, len(pairs))
		for _, p := range pairs {
			if len(p) != 2 {
				return Request{}, fmt.Errorf("%w: channel %s: range of %d numbers", ErrBadRequest, ch, len(p))
			}
			rs = append(rs, Range{p[0], p[1]})
		}
		r.Channels[ch] = rs
	}
	return r, nil
}

// ChannelIDs returns the request's channels in id order; the first is the
// natural "focused" channel for typing when a client names one.
func (r Request) ChannelIDs() []snowflake.ID {
	out := make([]snowflake.ID, 0, len(r.Channels))
	for ch := range r.Channels {
		out = append(out, ch)
	}
	slices.Sort(out)
	return out
}
