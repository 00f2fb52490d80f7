package memberlist

import (
	"encoding/json"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/permissions"
)

// ViewerFunc adapts a function to Viewer.
type ViewerFunc func(userID, channelID snowflake.ID) bool

// CanView calls f.
func (f ViewerFunc) CanView(userID, channelID snowflake.ID) bool { return f(userID, channelID) }

// ViewOverwrites extracts the VIEW_CHANNEL part of a stored channel's
// overwrites, for GroupKey.
func ViewOverwrites(ows []store.Overwrite) []ViewOverwrite {
	out := make([]ViewOverwrite, 0, len(ows))
	for _, o := range ows {
		out = append(out, ViewOverwrite{
			ID:     o.ID,
			Member: o.Type == store.OverwriteMember,
			Allow:  permissions.Bits(o.Allow).Has(permissions.ViewChannel),
			Deny:   permissions.Bits(o.Deny).Has(permissions.ViewChannel),
		})
	}
	return out
}

// DisplayName is the name a list sorts a member by: the nick, else the
// global name, else the username.
func DisplayName(nick, globalName, username string) string {
	switch {
	case nick != "":
		return nick
	case globalName != "":
		return globalName
	}
	return username
}

// WithPresence returns a member object with a `presence` field added, the
// shape of a member row: member must be a JSON object (as encoded from
// wire.Member) and presence a presence object (presence.Presence.Event
// with guild id 0).
func WithPresence(member, presence json.RawMessage) json.RawMessage {
	end := len(member) - 1
	for end >= 0 && member[end] != '}' {
		end--
	}
	if end < 0 {
		return member
	}
	b := make([]byte, 0, len(member)+len(presence)+12)
	b = append(b, member[:end]...)
	empty := true
	for i := end - 1; i >= 0; i-- {
		if c := member[i]; c != ' ' && c != '\n' && c != '\t' && c != '\r' {
			empty = c == '{'
			break
		}
	}
	if !empty {
		b = append(b, ',')
	}
	b = append(b, `"presence":`...)
	b = append(b, presence...)
	return append(b, member[end:]...)
}
