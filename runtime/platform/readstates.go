package platform

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/eventlog"
	eventlogbackend "github.com/concord-chat/concord/runtime/eventlog/backend"
	"github.com/concord-chat/concord/runtime/eventlog/outbox"
	"github.com/concord-chat/concord/runtime/guild"
	"github.com/concord-chat/concord/runtime/readstate"
	readstatepebble "github.com/concord-chat/concord/runtime/readstate/pebble"
)

// readPath is the event log with its outbox and the read-state role: the
// API publishes message events through the outbox after the store write,
// and read states count mentions from the log.
type readPath struct {
	log    eventlog.Log
	outbox *outbox.Outbox
	states *readstate.Service
	store  readstate.Store
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// openReadPath opens the event log named by cfg.EventLog ("mem" is the
// persisted in-process log), the outbox in the data directory and the
// read-state service, and starts the mention consumer.
func openReadPath(ctx context.Context, cfg Config, guilds *guild.Service, reg prometheus.Registerer) (*readPath, error) {
	spec := cfg.EventLog
	if spec == "mem" {
		spec = "memlog"
	}
	rp := &readPath{}
	var err error
	if rp.log, err = eventlogbackend.Open(ctx, spec, cfg.DataDir, cfg.Logger.With("component", "eventlog"), cfg.EventLogOptions()...); err != nil {
		return nil, err
	}
	if rp.outbox, err = outbox.New(outbox.Config{
		Dir: filepath.Join(cfg.DataDir, "outbox"), Registerer: reg, Logger: cfg.Logger.With("component", "outbox"),
	}, rp.log); err != nil {
		rp.close(ctx)
		return nil, fmt.Errorf("platform: outbox: %w", err)
	}
	if rp.store, err = readstatepebble.New(readstatepebble.Config{Dir: filepath.Join(cfg.DataDir, "readstate")}); err != nil {
		rp.close(ctx)
		return nil, fmt.Errorf("platform: read-state table: %w", err)
	}
	if rp.states, err = readstate.New(readstate.Config{Group: cfg.ReadStateGroup, Registerer: reg, Logger: cfg.Logger.With("component", "readstate")},
		rp.store, guilds, guilds); err != nil {
		rp.close(ctx)
		return nil, fmt.Errorf("platform: read states: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	rp.cancel = cancel
	rp.wg.Add(1)
	go func() {
		defer rp.wg.Done()
		if err := rp.states.Run(runCtx, rp.log); err != nil && !errors.Is(err, context.Canceled) {
			cfg.Logger.Error("read-state consumer stopped", "err", err)
		}
	}()
	return rp, nil
}

// close stops the consumer, flushes read states and closes everything.
func (rp *readPath) close(ctx context.Context) error {
	if rp == nil {
		return nil
	}
	if rp.cancel != nil {
		rp.cancel()
		rp.wg.Wait()
	}
	var errs []error
	if rp.states != nil {
		errs = append(errs, rp.states.Close(ctx))
	}
	if rp.store != nil {
		errs = append(errs, rp.store.Close())
	}
	if rp.outbox != nil {
		errs = append(errs, rp.outbox.Close())
	}
	if rp.log != nil {
		errs = append(errs, rp.log.Close())
	}
	return errors.Join(errs...)
}
