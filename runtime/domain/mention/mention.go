// Package mention finds the mentions in a message's content and applies
// Discord's allowed_mentions to them: the one parser behind every path
// that writes a message (REST sends and edits, webhooks, forum posts and
// the bot platform's interaction responses), so each message's event
// carries the same users, roles and @everyone for the read-state mention
// counts whoever wrote it.
package mention

import (
	"regexp"
	"slices"
	"strconv"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// MaxIDs is Discord's limit on allowed_mentions.users and .roles.
const MaxIDs = 100

var (
	userMention = regexp.MustCompile(`<@!?([0-9]{1,20})>`)
	roleMention = regexp.MustCompile(`<@&([0-9]{1,20})>`)
	everyone    = regexp.MustCompile(`@(everyone|here)`)
)

// Allowed is Discord's allowed_mentions object. Ids decode from JSON
// strings or numbers.
type Allowed struct {
	Parse       *[]string      `json:"parse"`
	Users       []snowflake.ID `json:"users"`
	Roles       []snowflake.ID `json:"roles"`
	RepliedUser bool           `json:"replied_user"`
}

// Parsed are the mentions in a message that may ping, before the guild
// decides which of them the author may make.
type Parsed struct {
	Everyone bool
	Users    []snowflake.ID
	Roles    []snowflake.ID
}

// Parse finds <@id>, <@!id>, <@&id>, @everyone and @here in content and
// applies allowed_mentions: without it everything parses; with it (even
// {}), only the kinds in parse ("users", "roles", "everyone") and the ids
// in its users and roles lists.
func Parse(content string, am *Allowed) Parsed {
	var out Parsed
	allowKind := func(kind string) bool {
		return am == nil || am.Parse != nil && slices.Contains(*am.Parse, kind)
	}
	for _, m := range userMention.FindAllStringSubmatch(content, 100) {
		id, err := snowflake.Parse(m[1])
		if err != nil || slices.Contains(out.Users, id) {
			continue
		}
		if allowKind("users") || am != nil && slices.Contains(am.Users, id) {
			out.Users = append(out.Users, id)
		}
	}
	for _, m := range roleMention.FindAllStringSubmatch(content, 100) {
		id, err := snowflake.Parse(m[1])
		if err != nil || slices.Contains(out.Roles, id) {
			continue
		}
		if allowKind("roles") || am != nil && slices.Contains(am.Roles, id) {
			out.Roles = append(out.Roles, id)
		}
	}
	out.Everyone = everyone.MatchString(content) && allowKind("everyone")
	return out
}

// Problem is an allowed_mentions object Discord refuses: the offending
// field (under allowed_mentions), Discord's error code and its message.
type Problem struct {
	Field, Code, Message string
}

// Error implements error.
func (p *Problem) Error() string { return p.Field + ": " + p.Message }

// Check validates an allowed_mentions object as Discord does: parse holds
// only "users", "roles" and "everyone", a kind in parse excludes its id
// list, and each list holds at most MaxIDs ids. A nil object is valid.
func (am *Allowed) Check() *Problem {
	if am == nil {
		return nil
	}
	if am.Parse != nil {
		for i, p := range *am.Parse {
			if !slices.Contains([]string{"users", "roles", "everyone"}, p) {
				return &Problem{"allowed_mentions.parse." + strconv.Itoa(i), "BASE_TYPE_CHOICES", "Value must be one of ('everyone', 'roles', 'users')."}
			}
		}
		if slices.Contains(*am.Parse, "users") && len(am.Users) > 0 {
			return &Problem{"allowed_mentions", "MESSAGE_ALLOWED_MENTIONS_PARSE_EXCLUSIVE", `parse:["users"] and users: [ids...] are mutually exclusive.`}
		}
		if slices.Contains(*am.Parse, "roles") && len(am.Roles) > 0 {
			return &Problem{"allowed_mentions", "MESSAGE_ALLOWED_MENTIONS_PARSE_EXCLUSIVE", `parse:["roles"] and roles: [ids...] are mutually exclusive.`}
		}
	}
	if len(am.Users) > MaxIDs {
		return &Problem{"allowed_mentions.users", "BASE_TYPE_MAX_LENGTH", "Must be 100 or fewer in length."}
	}
	if len(am.Roles) > MaxIDs {
		return &Problem{"allowed_mentions.roles", "BASE_TYPE_MAX_LENGTH", "Must be 100 or fewer in length."}
	}
	return nil
}
