// Package catalog is the tables of roles built through package wiring: the
// roles `concord dev` builds all of and `concord serve --roles=...` builds
// by name, with the same Build functions. Adding a role is one package
// declaring its wiring.Role and one line here.
package catalog

import (
	"github.com/concord-chat/concord/runtime/services/apirole"
	"github.com/concord-chat/concord/runtime/services/datarole"
	"github.com/concord-chat/concord/runtime/services/gatewayrole"
	"github.com/concord-chat/concord/runtime/services/guildrole"
	"github.com/concord-chat/concord/runtime/services/liverole"
	"github.com/concord-chat/concord/runtime/services/presencerole"
	"github.com/concord-chat/concord/runtime/services/readstaterole"
	"github.com/concord-chat/concord/runtime/services/relayrole"
	"github.com/concord-chat/concord/runtime/services/voicerole"
	"github.com/concord-chat/concord/runtime/services/wiring"
)

// Table is the roles built after the chat roles (voice, live comments).
var Table = []wiring.Role{
	liverole.Relay, liverole.Gateway, liverole.API, liverole.Router, liverole.Archiver, liverole.Moderation, // live comments
	voicerole.Role,
}

// Chat is the chat roles built through package wiring. Both commands build
// them, then Table's, in one wiring.Build pass (app.Process.Build), in the
// order their ports give (wiring.Order: each role after the roles giving a
// port it needs or uses, the table's order otherwise); a port nothing
// gives stops the process at start, naming it.
var Chat = []wiring.Role{
	datarole.Role, guildrole.Role, readstaterole.Role, presencerole.Role, relayrole.Role,
	// api: the guild's REST surface (named guild: built wherever the
	// guild role is, after it) and the public endpoint in front of it.
	apirole.GuildREST, apirole.Role,
	gatewayrole.Role,
}

// Names are the names of Table's roles.
func Names() []string {
	out := make([]string, 0, len(Table))
	for _, r := range Table {
		out = append(out, r.Name)
	}
	return out
}
