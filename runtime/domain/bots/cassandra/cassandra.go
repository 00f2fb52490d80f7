// Package cassandra stores the bot platform's records (bots.Store) in
// Apache Cassandra or ScyllaDB, beside Concord's main store
// (runtime/adapters/store/cassandra), so that every process of a multi-process
// deployment sees the same applications, commands, installations and
// interactions.
//
// It shares the main store's session (one connection pool, one set of
// credentials, Config.Consistency for reads and writes, LOCAL_SERIAL for
// lightweight transactions) and creates its tables in the same keyspace
// through the main store's migration machinery (schema.go), recorded in
// bots_schema_migrations.
//
// Layout. Records are JSON documents (column doc) beside the key columns
// their queries need:
//
//	bot_applications            (app_id)                 → application
//	bot_applications_by_bot     (bot_user_id)            → app id, claimed with IF NOT EXISTS
//	bot_applications_by_owner   ((owner_id), app_id)     (index)
//	bot_commands                ((app_id, guild_id), command_id) → command (guild 0: global)
//	bot_installations           ((guild_id), app_id)     → installation
//	bot_interactions            (interaction_id)         → interaction, version tag, TTL
//	bot_interactions_by_minute  ((minute), interaction_id)        (index, TTL)
//	bot_interaction_minutes     ((shard), minute)        (index of the index, TTL)
//
// Atomicity. UpdateInteraction is a compare-and-set on the interaction's
// version column (a lightweight transaction) in a retry loop, so updates
// from any number of processes never overwrite each other. CreateApplication
// claims the bot user and the application id with IF NOT EXISTS.
// ReplaceCommands replaces one (app, guild) partition in one single-partition
// batch, which every replica applies atomically and in isolation.
//
// Errors. Driver errors never leave this package: missing rows are
// bots.ErrNotFound, taken ids bots.ErrExists, and unavailability, timeouts
// and a closed store bots.ErrUnavailable (all wrapped).
package cassandra

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/adapters/store/cassandra"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/bots"
)

// Config configures a Store. The zero value of every field means its
// default.
type Config struct {
	// InteractionTTL is how long an interaction lives after it is created:
	// its row expires then even if nothing calls DeleteInteractionsBefore.
	// It must be at least the handler's token lifetime. Default: 16m (the
	// default bots.Config.TokenLifetime, 15m, plus the minute
	// PurgeInteractions waits beyond it).
	InteractionTTL time.Duration
	// MaxUpdateAttempts bounds the compare-and-set attempts of one
	// UpdateInteraction that keeps losing to updates from other processes;
	// past it the call fails with bots.ErrUnavailable. Default: 50.
	MaxUpdateAttempts int
	// Logger receives the store's log lines. Default: slog.Default().
	Logger *slog.Logger
}

// DefaultConfig returns the configuration New uses for zero fields.
func DefaultConfig() Config {
	return Config{InteractionTTL: 16 * time.Minute, MaxUpdateAttempts: 50}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.InteractionTTL <= 0 {
		c.InteractionTTL = d.InteractionTTL
	}
	if c.MaxUpdateAttempts <= 0 {
		c.MaxUpdateAttempts = d.MaxUpdateAttempts
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Store is bots.Store on Cassandra. It is safe for concurrent use, and any
// number of Stores (in any number of processes) may share one keyspace.
type Store struct {
	cfg     Config
	log     *slog.Logger
	session *gocql.Session
	// ttl is cfg.InteractionTTL in whole seconds, as CQL takes it.
	ttl int
	// updates serialises this process's UpdateInteraction calls per id, so
	// that the compare-and-set only ever races other processes.
	updates keyedMutex
	// minutes remembers when this process last recorded a minute in
	// bot_interaction_minutes (interactions.go).
	minutes minuteCache
	// life guards closed: operations hold it shared, Close exclusively.
	life   sync.RWMutex
	closed bool
}

var _ bots.Store = (*Store)(nil)

// New creates the bot tables in db's keyspace when missing (safe from many
// processes at once) and returns a Store on db's session. db stays owned by
// the caller: Store.Close does not close it, and db must outlive the Store.
// When the cluster cannot answer New fails with an error wrapping
// bots.ErrUnavailable.
func New(ctx context.Context, cfg Config, db *cassandra.Store) (*Store, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: bots cassandra: no cassandra store", bots.ErrConfig)
	}
	if cfg.InteractionTTL < 0 || (cfg.InteractionTTL > 0 && cfg.InteractionTTL < time.Second) {
		return nil, fmt.Errorf("%w: bots cassandra: InteractionTTL %v below 1s", bots.ErrConfig, cfg.InteractionTTL)
	}
	cfg = cfg.withDefaults()
	if err := db.Migrate(ctx, migrationsTable, migrations); err != nil {
		return nil, translate("migrate bot tables", err)
	}
	s := &Store{
		cfg:     cfg,
		log:     cfg.Logger.With("component", "bots-cassandra"),
		session: db.Session(),
		ttl:     int(cfg.InteractionTTL / time.Second),
	}
	s.minutes.init()
	s.log.Info("bot store ready", "interaction_ttl", cfg.InteractionTTL)
	return s, nil
}

// Close marks the store closed; later calls fail with bots.ErrUnavailable.
// The shared session stays open (its cassandra.Store owns it).
func (s *Store) Close() error {
	s.life.Lock()
	defer s.life.Unlock()
	s.closed = true
	return nil
}

// op runs fn while the store is open and ctx is live.
func (s *Store) op(ctx context.Context, fn func() error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("bots cassandra: %w: %w", bots.ErrUnavailable, err)
	}
	s.life.RLock()
	defer s.life.RUnlock()
	if s.closed {
		return fmt.Errorf("bots cassandra: %w: store closed", bots.ErrUnavailable)
	}
	return fn()
}

// wrapErr translates a driver error at the port: nil stays nil, missing
// rows become bots.ErrNotFound, unavailability and context errors
// bots.ErrUnavailable. Only the driver's text crosses, never its value
// (context errors excepted, so callers can still tell a deadline).
func wrapErr(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("bots cassandra: %s: %w: %w", op, bots.ErrUnavailable, err)
	case errors.Is(err, gocql.ErrNotFound):
		return fmt.Errorf("bots cassandra: %s: %w", op, bots.ErrNotFound)
	case cassandra.IsUnavailable(err):
		return fmt.Errorf("bots cassandra: %s: %w: %v", op, bots.ErrUnavailable, err)
	}
	return fmt.Errorf("bots cassandra: %s: %v", op, err)
}

// translate maps an error of the main store (cassandra.Store.Migrate) to
// the bots sentinels.
func translate(op string, err error) error {
	if errors.Is(err, store.ErrUnavailable) {
		return fmt.Errorf("bots cassandra: %s: %w: %v", op, bots.ErrUnavailable, err)
	}
	return fmt.Errorf("bots cassandra: %s: %w", op, err)
}

// id converts a snowflake to its bigint column value.
func id(v snowflake.ID) int64 { return int64(v) }

// keyedMutex is a set of mutexes by id, created on demand.
type keyedMutex struct {
	mu sync.Mutex
	m  map[snowflake.ID]*keyedEntry
}

type keyedEntry struct {
	mu   sync.Mutex
	refs int
}

// lock locks k and returns its unlock function.
func (k *keyedMutex) lock(key snowflake.ID) func() {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[snowflake.ID]*keyedEntry{}
	}
	e := k.m[key]
	if e == nil {
		e = &keyedEntry{}
		k.m[key] = e
	}
	e.refs++
	k.mu.Unlock()
	e.mu.Lock()
	return func() {
		e.mu.Unlock()
		k.mu.Lock()
		if e.refs--; e.refs == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
}
