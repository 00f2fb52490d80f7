package app

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/adapters/counters"
	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/config"
	"github.com/concord-chat/concord/runtime/domain/auth"
	"github.com/concord-chat/concord/runtime/services/apirole"
)

// Basics are what every process opens the same way after its store:
// the token-signing key and the issuer of tokens over it, the id
// generator of the process's snowflake pair, and the counters.
type Basics struct {
	// Key is the token-signing key (ServerKey).
	Key []byte
	// Auth issues and checks tokens with Key against users.
	Auth *auth.Issuer
	// IDs generates snowflakes for cfg's worker and process ids.
	IDs *snowflake.Generator
	// Counters are the process's counters (--redis, else in process):
	// the REST limits, bots' identifies, live comments. The caller
	// closes them.
	Counters counters.Counters
}

// OpenBasics opens the Basics of a process (cfg completed, its
// snowflake pair final): tokens are checked against users, the id
// generator's metrics go to metrics.
func OpenBasics(ctx context.Context, cfg config.Config, users store.Users, metrics prometheus.Registerer) (Basics, error) {
	var b Basics
	var err error
	if b.Key, err = ServerKey(cfg); err != nil {
		return Basics{}, err
	}
	if b.Auth, err = auth.New(auth.Config{Key: b.Key}, users); err != nil {
		return Basics{}, fmt.Errorf("auth: %w", err)
	}
	if b.IDs, err = snowflake.New(snowflake.Config{Worker: cfg.Worker, Process: cfg.Process, Registerer: metrics}); err != nil {
		return Basics{}, fmt.Errorf("snowflake: %w", err)
	}
	if b.Counters, err = apirole.OpenCounters(ctx, cfg); err != nil {
		return Basics{}, err
	}
	return b, nil
}
