package api

import "github.com/concord-chat/concord/runtime/base/route"

// Routes returns the REST API's routes, as New mounts them under each API
// version: the table is filled by the same registration code, so it
// cannot drift from the handler. Routes acting on a guild name it
// {guild}, on a channel {channel}, on a webhook {webhook}, on an invite
// {code} (see package route).
func Routes() []route.Route {
	var rec route.Recorder
	(&handler{}).routes(&rec, "")
	return rec.Routes
}
