package wiring

import (
	"context"
	"crypto/ed25519"
	"net/http"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/counters"
	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/adapters/eventlog/outbox"
	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/adapters/store/cassandra"
	"github.com/concord-chat/concord/runtime/base/lifecycle"
	"github.com/concord-chat/concord/runtime/domain/bots"
	"github.com/concord-chat/concord/runtime/domain/entitlement"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/domain/presence"
	"github.com/concord-chat/concord/runtime/domain/readstate"
	"github.com/concord-chat/concord/runtime/domain/voice"
	"github.com/concord-chat/concord/runtime/domain/voice/fleet"
	"github.com/concord-chat/concord/runtime/edge/gateway"
	"github.com/concord-chat/concord/runtime/services/transport"
)

// The ports of a process: every typed seam between roles, and between the
// root and the roles, is one of these keys. No role package names
// another role package; a role consumes the ports it names in
// Role.Needs (or Role.Uses) and gives the ones in Role.Gives.
//
// The root (runtime/app) decides, once per process, whether each port it
// gives is in this process or remote — the way LiveKit's
// routing.CreateRouter picks a local or a Redis router once — and gives
// it before any role is built. The roles give the others as they build,
// and the build order follows from what each needs (Order).

// Ports the root gives, chosen once per process.
var (
	// RawStore is the store adapter itself, under the wrappers that send
	// message traffic to the data nodes or coalesce it: the data role
	// coalesces over it.
	RawStore = Key[store.Store]{Name: "store/raw"}
	// ServerKey is the token-signing key: the bot platform signs
	// interaction tokens with it, attachment URLs with a key derived
	// from it.
	ServerKey = Key[[]byte]{Name: "server-key"}
	// Outbox is the event log's outbox message events are published
	// through. Absent: message events are not logged.
	Outbox = Key[*outbox.Outbox]{Name: "eventlog/outbox"}
	// EventLog is the chat event log the read-state role consumes:
	// the outbox's log, opened once per process.
	EventLog = Key[eventlog.Log]{Name: "eventlog"}
	// ReadStates is the read-state seam every role calls (acks,
	// READY's read_state): in process when this process owns the user,
	// over ReadStateNode otherwise. Absent: the process has no read
	// states.
	ReadStates = Key[ReadStateSeam]{Name: "readstates"}
	// Sink is where the guild role delivers its events: this process's
	// gateway when every role is here, the gateway nodes otherwise.
	Sink = Key[event.Sink]{Name: "guild/sink"}
	// Sessions is the session directory (events aimed at one user, on
	// every gateway node). Absent when the process's gateway holds every
	// session.
	Sessions = Key[transport.SessionDirectory]{Name: "gateway/sessions"}
	// Gateways is the process's one GatewayNode client over the gateway
	// ring: the guild role's sink in a cluster, the presence role's
	// broadcasts, the relay role's deliveries.
	Gateways = Key[transport.GatewayClient]{Name: "gateway/client"}
	// Placement is the guild placement ring: present when the guilds
	// are placed on the live guild nodes (a cluster), absent when every
	// guild is in this process. Roles that reach a guild through its
	// owner consume it.
	Placement = RingKey(registry.RoleGuild)
	// GuildClient reaches the guild owners over GuildNode (present with
	// Placement).
	GuildClient = Key[transport.GuildClient]{Name: "guild/client"}
	// GuildReader reads guilds from the store with no actor, for the
	// roles of a cluster node that run no guild (identify's READY, the
	// read-state role's channel-to-guild mapping and private channels):
	// opened once per process, where such a role runs.
	GuildReader = Key[*guild.Reader]{Name: "guild/reader"}
	// Voice is what the guild allocates calls with.
	Voice = Key[VoicePort]{Name: "voice"}
	// VoiceFleet is the in-process fleet the voice role adds its SFU to
	// (every role in this process). Absent in a cluster, where SFUs
	// report their load to the registry (VoiceLoad).
	VoiceFleet = Key[*fleet.Local]{Name: "voice/fleet"}
	// VoiceLoad is where an SFU reports its load in a cluster (the
	// registry); absent in one process (VoiceFleet).
	VoiceLoad = Key[voice.LoadReporter]{Name: "voice/load"}
	// VoiceKeys are the keys an SFU admits voice tokens with.
	VoiceKeys = Key[[]ed25519.PublicKey]{Name: "voice/trusted-keys"}
	// BotStore is the bot platform's store, opened once per process.
	BotStore = Key[bots.Store]{Name: "bots/store"}
	// Revocations is the path bots' entitlement revocations travel on:
	// the grants and the bus the lease manager runs on.
	Revocations = Key[RevocationPath]{Name: "bots/revocations"}
	// BotCounters are the counters bots' identifies are counted on
	// (max_concurrency, the daily budget). Absent when the process's
	// counters are not shared with the other gateway nodes.
	BotCounters = Key[counters.Counters]{Name: "gateway/bot-counters"}
	// LocalGateway returns this process's gateway node when every role
	// is here (the bot platform closes a bot's sessions with it on a
	// token reset); nil until the gateway role built it.
	LocalGateway = Key[func() *gateway.Node]{Name: "gateway/local"}
	// Relationships are the platform's relationships (a user's friends),
	// given by the presence role where its service holds them in this
	// process; the live gateway reads them for the friends boost.
	// Absent: no role of the process reaches them.
	Relationships = Key[presence.Relationships]{Name: "relationships"}
	// Cassandra is the process's Cassandra store (its session and
	// keyspace), absent on Pebble: the tables of the read-state role and
	// the live comments live in its keyspace, through its session.
	Cassandra = Key[*cassandra.Store]{Name: "store/cassandra"}
)

// Ports the roles give.
var (
	// GuildService is the guild role's service.
	GuildService = Key[*guild.Service]{Name: "guild/service"}
	// GatewayNode is the gateway role's node.
	GatewayNode = Key[*gateway.Node]{Name: "gateway/node"}
	// Leases is the process's one entitlement lease manager, given by
	// the gateway role; the bot platform publishes through it.
	Leases = Key[*entitlement.Manager]{Name: "api/leases"}
	// PresenceGateway is the presence side of the process's gateway,
	// given by the presence role. Absent: the gateway runs without
	// presence.
	PresenceGateway = Key[PresenceSide]{Name: "presence/gateway"}
	// REST is the handler the process serves on /api/, given by the role
	// that mounted it.
	REST = Key[http.Handler]{Name: "api/rest"}
)

// ReadStateSeam is the read-state seam (ReadStates).
type ReadStateSeam interface {
	transport.ReadStateBackend
	// Local is the process's read-state service (nil where the role runs
	// elsewhere).
	Local() *readstate.Service
}

// RevocationPath is where bots' entitlement grants are read and their
// revocations pushed (Revocations).
type RevocationPath interface {
	Source() entitlement.Source
	Bus() entitlement.Bus
}

// VoicePort is how the guild places calls (Voice).
type VoicePort struct {
	// Allocator places a call on an SFU.
	Allocator guild.VoiceAllocator
	// Endpoints lists the SFUs' endpoints (the web client's policy
	// admits them).
	Endpoints func() []string
	// Key signs voice admission tokens.
	Key ed25519.PrivateKey
	// Run, when set, follows the SFUs for the process's life.
	Run func(ctx context.Context) error
}

// PresenceGatewayHandler is the gateway's presence side: its
// SessionReporter and op 3, 8 and 14 handlers.
type PresenceGatewayHandler interface {
	gateway.SessionReporter
	OpHandlers() map[int]gateway.OpHandler
}

// PresenceSide is what the presence role gives the process's gateway
// (PresenceGateway): the gateway's SessionReporter and op handlers, how
// often the gateway re-reports its sessions, and the changes that make
// it re-report at once.
type PresenceSide struct {
	// Presence is the gateway's SessionReporter and op handlers.
	Presence PresenceGatewayHandler
	// ReportInterval is how often the gateway re-reports every local
	// session's state (gateway.Node.RunReports); zero is the gateway's
	// default.
	ReportInterval time.Duration
	// Resync, when set, runs for the gateway's life and calls report each
	// time the presence service's owners change (the presence ring moved
	// in a cluster), so the gateway re-reports its sessions to their new
	// owners at once instead of at the next interval.
	Resync func(ctx context.Context, report func(ctx context.Context))
}

// Reporter is the gateway's re-reporting of its sessions
// (gateway.Node).
type Reporter interface {
	// RunReports re-reports every local session every interval until ctx
	// ends.
	RunReports(ctx context.Context, interval time.Duration)
	// ReportSessions re-reports every local session once.
	ReportSessions(ctx context.Context)
}

// Parts are the loops a gateway with presence runs for its life: its
// periodic re-reports (part presence-reports) and, when the side has a
// Resync, the re-reports at once when the presence service's owners
// change (part presence-resync).
func (s PresenceSide) Parts(gw Reporter) []lifecycle.Part {
	parts := []lifecycle.Part{{Name: "presence-reports", Run: func(ctx context.Context) error {
		gw.RunReports(ctx, s.ReportInterval)
		return nil
	}}}
	if s.Resync != nil {
		parts = append(parts, lifecycle.Part{Name: "presence-resync", Run: func(ctx context.Context) error {
			s.Resync(ctx, gw.ReportSessions)
			return nil
		}})
	}
	return parts
}
