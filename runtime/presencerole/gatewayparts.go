package presencerole

import (
	"context"
	"time"

	"github.com/concord-chat/concord/runtime/lifecycle"
)

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
// Resync, the re-reports at once when the presence service's owners change
// (part presence-resync). The gateway adds them to its process's group.
func (s GatewaySide) Parts(gw Reporter) []lifecycle.Part {
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
