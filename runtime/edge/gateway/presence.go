package gateway

import (
	"context"
	"encoding/json"
	"time"

	"github.com/concord-chat/concord/runtime/base/lifecycle"
	"github.com/concord-chat/concord/runtime/domain/event"
)

// SessionReporter is the presence role as a gateway node sees it: it hears
// of every session that identified and every session that ended for good,
// and the node re-reports all its sessions periodically (RunReports) so a
// restarted presence role rebuilds what it lost.
type SessionReporter interface {
	// SessionStarted is called once per identified session, after
	// Backend.Subscribe, with the client's IDENTIFY properties and
	// presence. When a reporter is set, IDENTIFY's presence goes here
	// instead of to the op 3 handler.
	SessionStarted(ctx context.Context, s event.Session, c ClientInfo)
	// SessionEnded is called after Backend.Disconnect for a session that
	// ended for good (not one that may still resume).
	SessionEnded(ctx context.Context, s event.Session)
	// Report receives every session the node holds, attached or waiting
	// for RESUME.
	Report(ctx context.Context, node string, sessions []event.Session)
}

// ClientInfo is what IDENTIFY said about the client.
type ClientInfo struct {
	// OS and Browser are IDENTIFY's properties.os and properties.browser.
	OS, Browser string
	// Presence is IDENTIFY's `presence` object, nil when absent.
	Presence json.RawMessage
}

// DefaultReportInterval is how often RunReports re-reports sessions by
// default: a third of the presence role's default node TTL.
const DefaultReportInterval = 15 * time.Second

// ReportSessions hands every session the node holds to Config.Presence
// once. It does nothing without a reporter.
func (n *Node) ReportSessions(ctx context.Context) {
	p := n.cfg.Presence
	if p == nil {
		return
	}
	list := make([]event.Session, 0, n.Sessions())
	for _, s := range n.snapshot() {
		list = append(list, s.info)
	}
	p.Report(ctx, n.cfg.Node, list)
}

// RunReports calls ReportSessions every interval (DefaultReportInterval
// when not positive) until ctx ends.
func (n *Node) RunReports(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = DefaultReportInterval
	}
	lifecycle.Every(ctx, interval, n.ReportSessions)
}
