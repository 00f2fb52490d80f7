package api

import (
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/mention"
)

// allowedMentions is Discord's allowed_mentions object as a request body
// holds it (reqID for the API's decode errors).
type allowedMentions struct {
	Parse       *[]string `json:"parse"`
	Users       []reqID   `json:"users"`
	Roles       []reqID   `json:"roles"`
	RepliedUser bool      `json:"replied_user"`
}

// allowed converts am to the shared parser's form (nil stays nil).
func (am *allowedMentions) allowed() *mention.Allowed {
	if am == nil {
		return nil
	}
	out := &mention.Allowed{Parse: am.Parse, RepliedUser: am.RepliedUser}
	for _, id := range am.Users {
		out.Users = append(out.Users, snowflake.ID(id))
	}
	for _, id := range am.Roles {
		out.Roles = append(out.Roles, snowflake.ID(id))
	}
	return out
}

// parsedMentions are the mentions in a message that may ping.
type parsedMentions = mention.Parsed

// parseMentions is mention.Parse over a request's allowed_mentions: the
// parser every message-writing path shares.
func parseMentions(content string, am *allowedMentions) parsedMentions {
	return mention.Parse(content, am.allowed())
}
