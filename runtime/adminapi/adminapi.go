// Package adminapi holds the wire types of Concord's admin endpoints that
// both sides decode: the runtime's nodes serve them and the operator, its
// autoscaler and kubectl-concord read them. It imports only the standard
// library, so the runtime binary that serves the endpoints does not link
// the Kubernetes API types the operator's packages import.
package adminapi

import "time"

// LabelAdmin is the registry label in which a node publishes the
// host:port of its admin endpoints: api nodes ask the guild nodes for
// GET /admin/guilds there.
const LabelAdmin = "concord.dev/admin"

// GuildSample is one guild's load as GET /admin/guilds and
// GET /admin/guilds/{id} report it.
type GuildSample struct {
	// GuildID is the guild's snowflake.
	GuildID string `json:"guildID"`
	// Node is the registry node id running the guild's actor.
	Node string `json:"node"`
	// Pod is the pod name of that node; guild nodes leave it empty and
	// the operator fills it from the pod it asked.
	Pod string `json:"pod,omitempty"`
	// EventAgeP50 and EventAgeP99 are the time from an operation's entry
	// into the actor's queue to its dispatch, over the latest events of
	// the last minute, in nanoseconds.
	EventAgeP50 time.Duration `json:"eventAgeP50"`
	EventAgeP99 time.Duration `json:"eventAgeP99"`
	// QueueLength is the number of operations waiting in the actor's
	// mailbox.
	QueueLength int64 `json:"queueLength"`
	// Online is the number of gateway sessions subscribed to the guild.
	Online int64 `json:"online"`
	// Members is the guild's member count.
	Members int64 `json:"members"`
	// VoiceCalls is the number of the guild's voice channels with a call
	// in progress (someone in the channel).
	VoiceCalls int64 `json:"voiceCalls"`
}
