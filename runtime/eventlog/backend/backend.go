// Package backend opens the event log a configuration names: the
// in-process memlog in the data directory (the default of `concord dev`)
// or Apache Kafka (`--eventlog=kafka://127.0.0.1:9092`).
package backend

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/concord-chat/concord/runtime/eventlog"
	"github.com/concord-chat/concord/runtime/eventlog/kafka"
	"github.com/concord-chat/concord/runtime/eventlog/memlog"
)

// Open returns the log spec names:
//
//   - "" or "memlog": memlog persisted in dataDir/eventlog (in memory when
//     dataDir is empty);
//   - "kafka://host:port[,host:port][?partitions=N&replication=R&version=V]":
//     Kafka (see kafka.ParseURL).
func Open(ctx context.Context, spec, dataDir string, logger *slog.Logger) (eventlog.Log, error) {
	switch {
	case spec == "" || spec == "memlog":
		dir := ""
		if dataDir != "" {
			dir = filepath.Join(dataDir, "eventlog")
		}
		l, err := memlog.New(memlog.Config{Dir: dir, Logger: logger})
		if err != nil {
			return nil, fmt.Errorf("eventlog: open memlog: %w", err)
		}
		return l, nil
	case strings.HasPrefix(spec, "kafka://"):
		cfg, err := kafka.ParseURL(spec)
		if err != nil {
			return nil, err
		}
		cfg.Logger = logger
		l, err := kafka.New(ctx, cfg)
		if err != nil {
			return nil, fmt.Errorf("eventlog: open %s: %w", spec, err)
		}
		return l, nil
	}
	return nil, fmt.Errorf("%w: event log %q: want memlog or kafka://host:port", eventlog.ErrInvalid, spec)
}
