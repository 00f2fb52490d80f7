package cluster

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/concord-chat/concord/runtime/eventlog"
	eventlogbackend "github.com/concord-chat/concord/runtime/eventlog/backend"
	"github.com/concord-chat/concord/runtime/eventlog/outbox"
	"github.com/concord-chat/concord/runtime/readstaterole"
)

// RoleReadState is the read-state role (runtime/readstaterole): read
// markers and mention counts, fed from the event log, served over
// ReadStateNode.
const RoleReadState = readstaterole.Name

// kafkaLog reports whether an --eventlog URL names Kafka, the only event
// log processes of a cluster can share.
func kafkaLog(spec string) bool { return strings.HasPrefix(spec, "kafka://") }

// publisher is the event log and outbox of a guild node: the REST API
// publishes message events through the outbox (under the data directory)
// to the shared Kafka log.
type publisher struct {
	log    eventlog.Log
	outbox *outbox.Outbox
}

// openPublisher opens the event log and the node's outbox.
func openPublisher(ctx context.Context, cfg Config, n *Node) (*publisher, error) {
	p := &publisher{}
	var err error
	if p.log, err = eventlogbackend.Open(ctx, cfg.EventLog, cfg.DataDir, n.log.With("component", "eventlog"), cfg.EventLogOptions()...); err != nil {
		return nil, fmt.Errorf("cluster: event log: %w", err)
	}
	// One outbox per node name, so that processes sharing a data
	// directory do not share a queue.
	if p.outbox, err = outbox.New(outbox.Config{
		Dir: filepath.Join(cfg.DataDir, "outbox", cfg.Node), Registerer: n.metrics, Logger: n.log.With("component", "outbox"),
	}, p.log); err != nil {
		p.log.Close()
		return nil, fmt.Errorf("cluster: outbox: %w", err)
	}
	return p, nil
}

// close stops the outbox relay (queued events stay queued for the next
// start on the same directory) and closes the log.
func (p *publisher) close() error {
	if p == nil {
		return nil
	}
	return errors.Join(p.outbox.Close(), p.log.Close())
}
