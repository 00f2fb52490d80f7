package memberlist

import (
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Gateway intents that gate op 8 answers.
const (
	IntentGuildMembers   uint64 = 1 << 1
	IntentGuildPresences uint64 = 1 << 8
)

// Limits of op 8.
const (
	MaxQueryLimit = 100  // members per query
	MaxUserIDs    = 100  // user_ids per request
	MaxNonce      = 32   // bytes; longer nonces are dropped, as in Discord
	ChunkSize     = 1000 // members per GUILD_MEMBERS_CHUNK
)

// ChunkDispatchType is the dispatch name of op 8 answers.
const ChunkDispatchType = "GUILD_MEMBERS_CHUNK"

// ErrMissingIntent is an op 8 asking for every member without the
// GUILD_MEMBERS intent.
var ErrMissingIntent = errors.New("memberlist: missing intent")

// MembersRequest is op 8 REQUEST_GUILD_MEMBERS: either a name prefix
// query with a limit, or up to MaxUserIDs user ids.
type MembersRequest struct {
	GuildID snowflake.ID
	// Query is the name prefix; "" with Limit 0 asks for every member.
	Query    string
	HasQuery bool
	Limit    int
	UserIDs  []snowflake.ID
	// Presences asks for the members' presences (GUILD_PRESENCES only).
	Presences bool
	// Nonce is echoed in every chunk ("" when absent or too long).
	Nonce string
}

// ParseMembersRequest decodes an op 8 `d`; snowflakes may be numbers
// (discord.py) or strings, and user_ids a single id. Errors wrap
// ErrBadRequest: no guild_id, neither query nor user_ids, more than
// MaxUserIDs ids, a negative limit.
func ParseMembersRequest(d json.RawMessage) (MembersRequest, error) {
	var raw struct {
		GuildID   snowflake.ID    `json:"guild_id"`
		Query     *string         `json:"query"`
		Limit     int             `json:"limit"`
		Presences bool            `json:"presences"`
		UserIDs   json.RawMessage `json:"user_ids"`
		Nonce     string          `json:"nonce"`
	}
	if err := json.Unmarshal(d, &raw); err != nil {
		return MembersRequest{}, fmt.Errorf("%w: op 8: %w", ErrBadRequest, err)
	}
	r := MembersRequest{GuildID: raw.GuildID, Limit: raw.Limit, Presences: raw.Presences}
	if len(raw.Nonce) <= MaxNonce {
		r.Nonce = raw.Nonce
	}
	if raw.Query != nil {
		r.Query, r.HasQuery = *raw.Query, true
	}
	if len(raw.UserIDs) > 0 && string(raw.UserIDs) != "null" {
		if err := json.Unmarshal(raw.UserIDs, &r.UserIDs); err != nil {
			var one snowflake.ID
			if err := json.Unmarshal(raw.UserIDs, &one); err != nil {
				return MembersRequest{}, fmt.Errorf("%w: op 8 user_ids: %w", ErrBadRequest, err)
			}
			r.UserIDs = []snowflake.ID{one}
		}
	}
	switch {
	case r.GuildID == 0:
		return r, fmt.Errorf("%w: op 8 without guild_id", ErrBadRequest)
	case !r.HasQuery && len(r.UserIDs) == 0:
		return r, fmt.Errorf("%w: op 8 needs query or user_ids", ErrBadRequest)
	case len(r.UserIDs) > MaxUserIDs:
		return r, fmt.Errorf("%w: op 8 with %d user_ids", ErrBadRequest, len(r.UserIDs))
	case r.Limit < 0:
		return r, fmt.Errorf("%w: op 8 limit %d", ErrBadRequest, r.Limit)
	}
	return r, nil
}

// All reports whether the request asks for every member.
func (r MembersRequest) All() bool {
	return r.HasQuery && r.Query == "" && r.Limit == 0 && len(r.UserIDs) == 0
}

// Check applies the intents of a bot session (users pass all bits):
// asking for every member needs GUILD_MEMBERS (ErrMissingIntent), and
// presences are dropped without GUILD_PRESENCES.
func (r MembersRequest) Check(intents uint64) (MembersRequest, error) {
	if r.All() && intents&IntentGuildMembers == 0 {
		return r, fmt.Errorf("op 8 for every member: %w: GUILD_MEMBERS", ErrMissingIntent)
	}
	if intents&IntentGuildPresences == 0 {
		r.Presences = false
	}
	return r, nil
}

// Candidate is a member an op 8 may return.
type Candidate struct {
	UserID snowflake.ID
	// Names are matched by prefix, case-insensitively: username, global
	// name and nick.
	Names []string
	// Member is the member object (with `user`).
	Member json.RawMessage
	// Presence is the member's presence object ({"user":{"id"},"status",
	// "activities","client_status"}), nil when offline.
	Presence json.RawMessage
}

// Select picks the members that answer r from the guild's members: the
// listed user ids, or those whose names start with the query, at most
// Limit (capped at MaxQueryLimit unless every member was asked for).
func (r MembersRequest) Select(members iter.Seq[Candidate]) []Candidate {
	var out []Candidate
	if len(r.UserIDs) > 0 {
		want := make(map[snowflake.ID]bool, len(r.UserIDs))
		for _, id := range r.UserIDs {
			want[id] = true
		}
		for c := range members {
			if want[c.UserID] {
				out = append(out, c)
				delete(want, c.UserID)
				if len(want) == 0 {
					break
				}
			}
		}
		return out
	}
	limit := r.Limit
	if !r.All() && (limit == 0 || limit > MaxQueryLimit) {
		limit = MaxQueryLimit
	}
	q := strings.ToLower(r.Query)
	for c := range members {
		if r.All() || matches(c.Names, q) {
			out = append(out, c)
			if limit > 0 && len(out) == limit {
				break
			}
		}
	}
	return out
}

func matches(names []string, q string) bool {
	for _, n := range names {
		if strings.HasPrefix(strings.ToLower(n), q) {
			return true
		}
	}
	return false
}

// Chunks encodes the GUILD_MEMBERS_CHUNK payloads answering r with
// matched: at most ChunkSize members each, `chunk_index`/`chunk_count`,
// `not_found` (requested user ids that did not match) in the first chunk,
// `presences` when asked for (online members only), and the nonce. There
// is always at least one chunk, so clients waiting for it finish.
func Chunks(r MembersRequest, matched []Candidate) []json.RawMessage {
	count := max(1, (len(matched)+ChunkSize-1)/ChunkSize)
	var notFound []snowflake.ID
	if len(r.UserIDs) > 0 {
		found := make(map[snowflake.ID]bool, len(matched))
		for _, c := range matched {
			found[c.UserID] = true
		}
		for _, id := range r.UserIDs {
			if !found[id] {
				notFound = append(notFound, id)
				found[id] = true
			}
		}
	}
	out := make([]json.RawMessage, 0, count)
	for i := range count {
		part := matched[min(i*ChunkSize, len(matched)):min((i+1)*ChunkSize, len(matched))]
		b := make([]byte, 0, 128+len(part)*256)
		b = append(b, `{"guild_id":"`...)
		b = strconv.AppendUint(b, uint64(r.GuildID), 10)
		b = append(b, `","members":[`...)
		for j, c := range part {
			if j > 0 {
				b = append(b, ',')
			}
			b = append(b, c.Member...)
		}
		b = append(b, `],"chunk_index":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `,"chunk_count":`...)
		b = strconv.AppendInt(b, int64(count), 10)
		if i == 0 && len(r.UserIDs) > 0 {
			b = append(b, `,"not_found":[`...)
			for j, id := range notFound {
				if j > 0 {
					b = append(b, ',')
				}
				b = append(b, '"')
				b = strconv.AppendUint(b, uint64(id), 10)
				b = append(b, '"')
			}
			b = append(b, ']')
		}
		if r.Presences {
			b = append(b, `,"presences":[`...)
			first := true
			for _, c := range part {
				if c.Presence == nil {
					continue
				}
				if !first {
					b = append(b, ',')
				}
				first = false
				b = append(b, c.Presence...)
			}
			b = append(b, ']')
		}
		if r.Nonce != "" {
			nonce, _ := json.Marshal(r.Nonce) // a string always encodes
			b = append(b, `,"nonce":`...)
			b = append(b, nonce...)
		}
		out = append(out, append(b, '}'))
	}
	return out
}
