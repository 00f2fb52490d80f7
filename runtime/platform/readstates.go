package platform

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/app"
	"github.com/concord-chat/concord/runtime/eventlog"
	"github.com/concord-chat/concord/runtime/eventlog/outbox"
	"github.com/concord-chat/concord/runtime/readstaterole"
)

// readPath is the event log with its outbox: the API publishes message
// events through the outbox after the store write, and the readstate
// role counts mentions from the same log.
type readPath struct {
	log    eventlog.Log
	outbox *outbox.Outbox
}

// openReadPath opens the event log named by cfg.EventLog ("mem" is the
// persisted in-process log) and the outbox in the data directory.
func openReadPath(ctx context.Context, cfg Config, reg prometheus.Registerer) (*readPath, error) {
	el, err := app.OpenEventLog(ctx, cfg, readstaterole.LogSpec(cfg.EventLog), filepath.Join(cfg.DataDir, "outbox"), reg)
	if err != nil {
		return nil, fmt.Errorf("platform: %w", err)
	}
	return &readPath{log: el.Log, outbox: el.Outbox}, nil
}

// close closes the outbox and the log.
func (rp *readPath) close() error {
	if rp == nil {
		return nil
	}
	return (&app.EventLog{Log: rp.log, Outbox: rp.outbox}).Close()
}
