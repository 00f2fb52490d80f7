package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/concord-chat/concord/runtime/app"
	"github.com/concord-chat/concord/runtime/readstaterole"
)

// RoleReadState is the read-state role (runtime/readstaterole): read
// markers and mention counts, fed from the event log, served over
// ReadStateNode.
const RoleReadState = readstaterole.Name

// kafkaLog reports whether an --eventlog URL names Kafka, the only event
// log processes of a cluster can share.
func kafkaLog(spec string) bool { return strings.HasPrefix(spec, "kafka://") }

// openPublisher opens the event log and the outbox of a guild node: the
// REST API publishes message events through the outbox (under the data
// directory) to the shared Kafka log. One outbox per node name, so that
// processes sharing a data directory do not share a queue.
func openPublisher(ctx context.Context, cfg Config, n *Node) (*app.EventLog, error) {
	cfg.Logger = n.log
	el, err := app.OpenEventLog(ctx, cfg, cfg.EventLog, filepath.Join(cfg.DataDir, "outbox", cfg.Node), n.metrics)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	return el, nil
}
