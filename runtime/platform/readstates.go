package platform

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/eventlog"
	eventlogbackend "github.com/concord-chat/concord/runtime/eventlog/backend"
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
	rp := &readPath{}
	var err error
	if rp.log, err = eventlogbackend.Open(ctx, readstaterole.LogSpec(cfg.EventLog), cfg.DataDir, cfg.Logger.With("component", "eventlog"), cfg.EventLogOptions()...); err != nil {
		return nil, err
	}
	if rp.outbox, err = outbox.New(outbox.Config{
		Dir: filepath.Join(cfg.DataDir, "outbox"), Registerer: reg, Logger: cfg.Logger.With("component", "outbox"),
	}, rp.log); err != nil {
		rp.close()
		return nil, fmt.Errorf("platform: outbox: %w", err)
	}
	return rp, nil
}

// close closes the outbox and the log.
func (rp *readPath) close() error {
	if rp == nil {
		return nil
	}
	var errs []error
	if rp.outbox != nil {
		errs = append(errs, rp.outbox.Close())
	}
	if rp.log != nil {
		errs = append(errs, rp.log.Close())
	}
	return errors.Join(errs...)
}
