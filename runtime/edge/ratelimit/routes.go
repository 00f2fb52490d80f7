package ratelimit

import (
	"crypto/sha256"
	"encoding/hex"
	"hash/fnv"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Limit is the shape of one route bucket: Requests per Window, refilled
// evenly (see counters.Counters.Take).
type Limit struct {
	Requests int
	Window   time.Duration
	// Bucket names the bucket. Routes given the same name share one bucket
	// (per principal and major parameter). Empty: the route's own
	// "METHOD template".
	Bucket string
	// OnlyFields, when set, is a comma-separated list of top-level JSON
	// body fields: only requests whose body carries one of them spend
	// this bucket, the others are limited by Config.DefaultLimit (the
	// middleware reads the body, at most MaxPeek bytes, and hands it on
	// unchanged). Discord's channel edit limit works this way: two name
	// or topic changes per ten minutes, other edits as usual.
	OnlyFields string
}

// MaxPeek bounds how much of a body the middleware reads for OnlyFields;
// a larger body counts as matching.
const MaxPeek = 1 << 20

// DefaultRoutes returns the per-route limits Concord ships, keyed by
// "METHOD template" with templates as PathRoute writes them. They follow the
// limits Discord is known to apply; every other route gets
// Config.DefaultLimit.
func DefaultRoutes() map[string]Limit {
	return map[string]Limit{
		"POST /channels/{channel_id}/messages":                                      {Requests: 5, Window: 5 * time.Second},
		"PATCH /channels/{channel_id}/messages/{message_id}":                        {Requests: 5, Window: 5 * time.Second},
		"DELETE /channels/{channel_id}/messages/{message_id}":                       {Requests: 5, Window: time.Second},
		"POST /channels/{channel_id}/messages/bulk-delete":                          {Requests: 1, Window: time.Second},
		"POST /channels/{channel_id}/typing":                                        {Requests: 5, Window: 5 * time.Second},
		"PATCH /channels/{channel_id}":                                              {Requests: 2, Window: 10 * time.Minute, OnlyFields: "name,topic"},
		"PUT /channels/{channel_id}/messages/{message_id}/reactions/{emoji}/@me":    {Requests: 1, Window: 250 * time.Millisecond, Bucket: "reactions"},
		"DELETE /channels/{channel_id}/messages/{message_id}/reactions/{emoji}/@me": {Requests: 1, Window: 250 * time.Millisecond, Bucket: "reactions"},
		"PATCH /guilds/{guild_id}/members/@me":                                      {Requests: 1, Window: time.Second},
		"POST /guilds/{guild_id}/channels":                                          {Requests: 5, Window: 10 * time.Second},
		"POST /guilds/{guild_id}/roles":                                             {Requests: 250, Window: 48 * time.Hour},
		"POST /webhooks/{webhook_id}/{webhook_token}":                               {Requests: 5, Window: 2 * time.Second},
		"GET /gateway/bot":                                                          {Requests: 2, Window: 5 * time.Second},
	}
}

// InteractionRoute reports whether template is an interaction endpoint:
// an interaction callback or a webhook addressed by token (followups and
// @original edits). Discord exempts these from the global limit, and so
// does the default Config.
func InteractionRoute(template string) bool {
	return strings.HasPrefix(template, "/interactions/{interaction_id}/{interaction_token}") ||
		strings.HasPrefix(template, "/webhooks/{webhook_id}/{webhook_token}")
}

// maxSegments bounds the work and the key length a hostile path costs.
const maxSegments = 16

// PathRoute derives the route template and major parameter of r from its
// URL path; it is the default Config.RouteOf. See Template.
func PathRoute(r *http.Request) (template, major string) {
	return Template(r.URL.Path)
}

// Template turns a request path into the route template that names its
// bucket and the major parameter that splits the bucket.
//
// An "/api" or "/api/v{n}" prefix is dropped. Every snowflake segment
// becomes a placeholder named for the segment before it ("channels" →
// {channel_id}, "messages" → {message_id}, "members" → {user_id}, ...,
// {id} otherwise), as do the tokens of /webhooks/{webhook_id}/{token} and
// /interactions/{interaction_id}/{token}, the emoji of reactions/{emoji} and
// the code of invites/{code}. The major parameter is the first id following
// channels/, guilds/, webhooks/ (with a digest of the webhook token:
// webhook_id+token, the token itself never leaves this function) or
// interactions/; it is empty for routes without one.
//
// Template("/api/v10/channels/1234567890/messages/42") returns
// ("/channels/{channel_id}/messages/{message_id}", "1234567890").
func Template(path string) (template, major string) {
	path = strings.TrimPrefix(path, "/api")
	if rest, ok := strings.CutPrefix(path, "/v"); ok {
		if i := strings.IndexByte(rest, '/'); i > 0 && isDigits(rest[:i]) {
			path = rest[i:]
		} else if isDigits(rest) {
			path = ""
		}
	}
	var b strings.Builder
	b.Grow(len(path) + 32)
	prev, prevPrev := "", ""
	rest := strings.TrimPrefix(path, "/")
	for n := 0; ; n++ {
		if n == maxSegments {
			b.WriteString("/{...}")
			break
		}
		seg, tail, more := strings.Cut(rest, "/")
		b.WriteByte('/')
		switch {
		case prevPrev == "webhooks" && isSnowflake(prev) && seg != "":
			b.WriteString("{webhook_token}")
			if major != "" {
				major += "+" + digest(seg)
			}
		case prevPrev == "interactions" && isSnowflake(prev) && seg != "":
			b.WriteString("{interaction_token}")
		case prev == "reactions" && seg != "":
			b.WriteString("{emoji}")
		case prev == "invites" && seg != "":
			b.WriteString("{invite_code}")
		case isSnowflake(seg):
			b.WriteString(placeholder(prev))
			if major == "" && (prev == "channels" || prev == "guilds" || prev == "webhooks" || prev == "interactions") {
				major = seg
			}
		default:
			b.WriteString(seg)
		}
		if !more {
			break
		}
		prevPrev, prev, rest = prev, seg, tail
	}
	return b.String(), major
}

func placeholder(prev string) string {
	switch prev {
	case "channels":
		return "{channel_id}"
	case "guilds":
		return "{guild_id}"
	case "messages":
		return "{message_id}"
	case "users", "members", "bans", "recipients":
		return "{user_id}"
	case "roles":
		return "{role_id}"
	case "webhooks":
		return "{webhook_id}"
	case "interactions":
		return "{interaction_id}"
	case "applications":
		return "{application_id}"
	case "commands":
		return "{command_id}"
	case "emojis":
		return "{emoji_id}"
	case "stickers":
		return "{sticker_id}"
	case "permissions":
		return "{overwrite_id}"
	case "threads":
		return "{thread_id}"
	}
	return "{id}"
}

// isSnowflake reports whether s is a decimal uint64, as every Discord id is.
func isSnowflake(s string) bool {
	if !isDigits(s) || len(s) > 20 {
		return false
	}
	_, err := strconv.ParseUint(s, 10, 64)
	return err == nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// digest is a short, stable, one-way name for a secret (a token), fit for
// counter keys that operators can read.
func digest(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:8])
}

// bucketHash is the opaque X-RateLimit-Bucket value of a bucket name. Like
// Discord's, it names the route bucket without its major parameter.
func bucketHash(name string) string {
	h := fnv.New64a()
	h.Write([]byte(name))
	return strconv.FormatUint(h.Sum64(), 16)
}
