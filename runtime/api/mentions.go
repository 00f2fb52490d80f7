package api

import (
	"regexp"
	"slices"

	"github.com/concord-chat/concord/runtime/snowflake"
)

var (
	userMention = regexp.MustCompile(`<@!?([0-9]{1,20})>`)
	roleMention = regexp.MustCompile(`<@&([0-9]{1,20})>`)
	everyone    = regexp.MustCompile(`@(everyone|here)`)
)

// allowedMentions is Discord's allowed_mentions object.
type allowedMentions struct {
	Parse       *[]string `json:"parse"`
	Users       []reqID   `json:"users"`
	Roles       []reqID   `json:"roles"`
	RepliedUser bool      `json:"replied_user"`
}

// parsedMentions are the mentions in a message that may ping.
type parsedMentions struct {
	Everyone bool
	Users    []snowflake.ID
	Roles    []snowflake.ID
}

// parseMentions finds <@id>, <@!id>, <@&id>, @everyone and @here in
// content and applies allowed_mentions: without it everything parses; with
// it (even {}), only the kinds in parse ("users", "roles", "everyone") and
// the ids in its users and roles lists.
func parseMentions(content string, am *allowedMentions) parsedMentions {
	var out parsedMentions
	allowKind := func(kind string) bool {
		return am == nil || am.Parse != nil && slices.Contains(*am.Parse, kind)
	}
	listed := func(list []reqID, id snowflake.ID) bool {
		return slices.Contains(list, reqID(id))
	}
	for _, m := range userMention.FindAllStringSubmatch(content, 100) {
		id, err := snowflake.Parse(m[1])
		if err != nil || slices.Contains(out.Users, id) {
			continue
		}
		if allowKind("users") || am != nil && listed(am.Users, id) {
			out.Users = append(out.Users, id)
		}
	}
	for _, m := range roleMention.FindAllStringSubmatch(content, 100) {
		id, err := snowflake.Parse(m[1])
		if err != nil || slices.Contains(out.Roles, id) {
			continue
		}
		if allowKind("roles") || am != nil && listed(am.Roles, id) {
			out.Roles = append(out.Roles, id)
		}
	}
	out.Everyone = everyone.MatchString(content) && allowKind("everyone")
	return out
}
