// Package backend opens the event log a configuration names: the
// in-process memlog in the data directory (the default of `concord dev`)
// or Apache Kafka (`--eventlog=kafka://127.0.0.1:9092`).
package backend

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/adapters/eventlog/kafka"
	"github.com/concord-chat/concord/runtime/adapters/eventlog/memlog"
)

// Open returns the log spec names:
//
//   - "" or "memlog": memlog persisted in dataDir/eventlog (in memory when
//     dataDir is empty);
//   - "kafka://host:port[,host:port][?partitions=N&replication=R&version=V]":
//     Kafka (see kafka.ParseURL), adjusted by opts (credentials, TLS).
//
// Errors name the spec with any password redacted.
func Open(ctx context.Context, spec, dataDir string, logger *slog.Logger, opts ...Option) (eventlog.Log, error) {
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
		for _, o := range opts {
			o(&cfg)
		}
		l, err := kafka.New(ctx, cfg)
		if err != nil {
			return nil, fmt.Errorf("eventlog: open kafka %s: %w", strings.Join(cfg.Brokers, ","), err)
		}
		return l, nil
	}
	return nil, fmt.Errorf("%w: event log %q: want memlog or kafka://host:port", eventlog.ErrInvalid, redact(spec))
}

// Option adjusts the Kafka configuration Open builds from the spec.
type Option func(*kafka.Config)

// WithKafkaAuth authenticates with SASL (PLAIN unless
// WithKafkaSASLMechanism says otherwise) as username, when set, and dials
// the brokers over TLS when tls is set. A username or password in
// the spec's URL wins over the one given here: each field is filled only
// when the URL left it empty.
func WithKafkaAuth(username, password string, tls bool) Option {
	return func(c *kafka.Config) {
		if c.Username == "" {
			c.Username = username
		}
		if c.Password == "" {
			c.Password = password
		}
		c.TLS = c.TLS || tls
	}
}

// WithKafkaSASLMechanism selects the SASL mechanism used with the
// credentials: kafka.MechanismPlain (the default when empty),
// kafka.MechanismSCRAMSHA256 or kafka.MechanismSCRAMSHA512.
func WithKafkaSASLMechanism(mechanism string) Option {
	return func(c *kafka.Config) {
		if mechanism != "" {
			c.Mechanism = mechanism
		}
	}
}

// redact hides the password of a URL-shaped spec.
func redact(spec string) string {
	if u, err := url.Parse(spec); err == nil {
		return u.Redacted()
	}
	if _, rest, ok := strings.Cut(spec, "@"); ok {
		return "xxxxx@" + rest
	}
	return spec
}
