package presencerole

import (
	"context"
	"time"

	"github.com/concord-chat/concord/runtime/role"
)

// GatewaySide is what the presence side gives the process's gateway: the
// gateway's SessionReporter and op handlers, how often the gateway
// re-reports its sessions, and the changes that make it re-report at once.
type GatewaySide struct {
	// Presence is the gateway's SessionReporter and its op 3, 8 and 14
	// handlers (Gateway.OpHandlers).
	Presence *Gateway
	// ReportInterval is how often the gateway re-reports every local
	// session's state (gateway.Node.RunReports); zero is the gateway's
	// default.
	ReportInterval time.Duration
	// Resync, when set, runs for the gateway's life and calls report each
	// time the presence service's owners change (the presence ring moved in
	// `concord serve`), so the gateway re-reports its sessions to their new
	// owners at once instead of at the next interval.
	Resync func(ctx context.Context, report func(ctx context.Context))
}

// GatewayKey is the seam the gateway role finds its presence side under.
// Absent: the gateway runs without presence (a `concord serve` gateway
// node without --presence).
var GatewayKey = role.Key[GatewaySide]{Name: "presence/gateway"}
