package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	eventlogbackend "github.com/concord-chat/concord/runtime/adapters/eventlog/backend"
	"github.com/concord-chat/concord/runtime/adapters/eventlog/outbox"
	"github.com/concord-chat/concord/runtime/adapters/store"
	cassandrastore "github.com/concord-chat/concord/runtime/adapters/store/cassandra"
	pebblestore "github.com/concord-chat/concord/runtime/adapters/store/pebble"
	"github.com/concord-chat/concord/runtime/config"
	"github.com/concord-chat/concord/runtime/services/dataservice"
)

// OpenStore opens the chat store cfg.Store names (cfg completed): a
// Pebble directory (pebble:DIR), which one process alone may use, or
// Cassandra (cassandra:// or scylla://), shared by the processes of a
// cluster, behind the process's coalescing data service. Connecting to
// Cassandra retries with backoff while it is down.
func OpenStore(ctx context.Context, cfg config.Config) (store.Store, error) {
	scheme, rest := backendScheme(cfg.Store)
	switch scheme {
	case "pebble":
		s, err := pebblestore.New(pebblestore.Config{Dir: rest, Logger: cfg.Logger.With("component", "store")})
		if err != nil {
			return nil, fmt.Errorf("open pebble store %s: %w", rest, err)
		}
		return s, nil
	case "cassandra", "scylla":
		ccfg, err := cassandrastore.ParseURL(cfg.Store)
		if err != nil {
			return nil, fmt.Errorf("--store: %w", err)
		}
		cfg.ApplyCassandraAuth(&ccfg)
		ccfg.Logger = cfg.Logger.With("component", "store")
		s, err := cassandrastore.Connect(ctx, ccfg)
		if err != nil {
			return nil, fmt.Errorf("open cassandra store: %w", err)
		}
		return dataservice.Wrap(s, dataservice.New(s, dataservice.Config{Name: cfg.Node, Logger: cfg.Logger.With("component", "data")})), nil
	default:
		return nil, fmt.Errorf("unknown --store %q (want pebble:DIR or cassandra://host:port/keyspace)", config.RedactURL(cfg.Store))
	}
}

// backendScheme splits "scheme:rest" or "scheme://rest" URLs of the
// backend flags.
func backendScheme(s string) (scheme, rest string) {
	if i := strings.Index(s, "://"); i >= 0 {
		return s[:i], s[i+3:]
	}
	if i := strings.Index(s, ":"); i >= 0 {
		return s[:i], s[i+1:]
	}
	return s, ""
}

// ServerKey returns the token-signing key (cfg completed): cfg.ServerKey
// when set (at least 32 bytes), else the key kept in
// <DataDir>/server.key, created on first start. Processes of one cluster
// must share the key.
func ServerKey(cfg config.Config) ([]byte, error) {
	if cfg.ServerKey != "" {
		if len(cfg.ServerKey) < 32 {
			return nil, errors.New("server key must be at least 32 bytes")
		}
		return []byte(cfg.ServerKey), nil
	}
	path := filepath.Join(cfg.DataDir, "server.key")
	if b, err := os.ReadFile(path); err == nil {
		k, err := hex.DecodeString(strings.TrimSpace(string(b)))
		if err != nil || len(k) < 32 {
			return nil, fmt.Errorf("%s is not a hex key of at least 32 bytes", path)
		}
		return k, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read server key: %w", err)
	}
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("generate server key: %w", err)
	}
	if err := WriteFileSync(path, []byte(hex.EncodeToString(k)+"\n")); err != nil {
		return nil, fmt.Errorf("write server key: %w", err)
	}
	return k, nil
}

// WriteFileSync writes a file durably (0600) via a temp file and rename.
func WriteFileSync(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// EventLog is the process's event log with its outbox: the REST API and
// the bot platform publish message events through the outbox (committed
// with the message where the store allows), and the read-state role
// counts mentions from the log. Outbox is nil on a node that publishes
// nothing (a read-state node of a cluster).
type EventLog struct {
	Log    eventlog.Log
	Outbox *outbox.Outbox
}

// OpenEventLog opens the event log spec names and its outbox in dir
// (empty: the log alone, for a process that publishes nothing).
func OpenEventLog(ctx context.Context, cfg config.Config, spec, dir string, reg prometheus.Registerer) (*EventLog, error) {
	l, err := eventlogbackend.Open(ctx, spec, cfg.DataDir, cfg.Logger.With("component", "eventlog"), cfg.EventLogOptions()...)
	if err != nil {
		return nil, fmt.Errorf("event log: %w", err)
	}
	if dir == "" {
		return &EventLog{Log: l}, nil
	}
	ob, err := outbox.New(outbox.Config{Dir: dir, Registerer: reg, Logger: cfg.Logger.With("component", "outbox")}, l)
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("outbox: %w", err)
	}
	return &EventLog{Log: l, Outbox: ob}, nil
}

// Close stops the outbox relay (queued events stay queued for the next
// start on the same directory) and closes the log.
func (e *EventLog) Close() error {
	if e == nil {
		return nil
	}
	if e.Outbox == nil {
		return e.Log.Close()
	}
	return errors.Join(e.Outbox.Close(), e.Log.Close())
}
