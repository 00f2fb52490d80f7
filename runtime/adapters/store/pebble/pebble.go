// Package pebble is Concord's embedded store: store.Store on a single
// local Pebble (LSM) database, for single-process deployments, development
// and tests.
//
// Every acknowledged write is committed with pebble.Sync, so a write that
// returned nil survives kill -9 and power loss (as far as fsync does).
// The key layout (keys.go) mirrors the production Cassandra schema:
// messages are partitioned by (channel, bucket) and clustered by id
// descending, and a per-channel index of non-empty buckets lets history
// reads walk only buckets that hold messages. Values are encoded as
// described in codec.go.
package pebble

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/cockroachdb/pebble"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Config configures a Store.
type Config struct {
	// Dir is the database directory; it is created if missing. Required.
	Dir string
	// Logger receives Pebble's log lines (at Info; fatal errors at Error).
	// Default: slog.Default().
	Logger *slog.Logger
	// BucketWidth is the time width of a channel's message bucket.
	// Default: store.DefaultBucketWidth (10 days). It must not change for
	// an existing database: it is part of the key of every message.
	BucketWidth time.Duration
	// CacheSize is Pebble's block cache size in bytes. Default: 64 MiB.
	CacheSize int64
}

// Store is store.Store on Pebble. It is safe for concurrent use.
type Store struct {
	db          *pebble.DB
	cache       *pebble.Cache
	log         *slog.Logger
	bucketWidth time.Duration

	// chLocks serialise bulk deletes of a channel (exclusive) against puts
	// (shared), so the "bucket became empty" check of a delete is not
	// raced by a put into that bucket. Striped by channel id.
	chLocks [64]sync.RWMutex
	seed    maphash.Seed
	// metaMu serialises read-modify-writes of guild state (index upkeep
	// when a channel, invite or guild changes or goes); PutMember holds it
	// shared so that DeleteGuild cannot orphan a user -> guild entry.
	metaMu sync.RWMutex
	// life guards closed: operations hold it shared, Close exclusively.
	life   sync.RWMutex
	closed bool
	// userMu makes the username check-and-write of CreateUser/PutUser atomic.
	userMu sync.Mutex
	// outboxMu guards outboxLast, the last outbox id handed out (outbox.go).
	outboxMu   sync.Mutex
	outboxLast uint64
}

var _ store.Store = (*Store)(nil)

// New opens (or creates) the database in cfg.Dir.
func New(cfg Config) (*Store, error) {
	if cfg.Dir == "" {
		return nil, errors.New("pebble store: Config.Dir is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.BucketWidth <= 0 {
		cfg.BucketWidth = store.DefaultBucketWidth
	}
	if cfg.BucketWidth < time.Millisecond {
		return nil, fmt.Errorf("pebble store: BucketWidth %v is below 1ms", cfg.BucketWidth)
	}
	if cfg.CacheSize <= 0 {
		cfg.CacheSize = 64 << 20
	}
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("pebble store: create %s: %w", cfg.Dir, err)
	}
	log := cfg.Logger.With("component", "pebble", "dir", cfg.Dir)
	cache := pebble.NewCache(cfg.CacheSize)
	opts := &pebble.Options{
		Cache:  cache,
		Logger: slogLogger{log},
	}
	db, err := pebble.Open(cfg.Dir, opts)
	if err != nil {
		cache.Unref()
		return nil, fmt.Errorf("pebble store: open %s: %w", cfg.Dir, err)
	}
	s := &Store{
		db:          db,
		cache:       cache,
		log:         log,
		bucketWidth: cfg.BucketWidth,
		seed:        maphash.MakeSeed(),
	}
	if err := s.initOutbox(); err != nil {
		db.Close()
		cache.Unref()
		return nil, err
	}
	return s, nil
}

// Close waits for operations in flight and closes the database; there is
// nothing to flush, every write is already synced. Later calls fail with
// store.ErrUnavailable; closing twice is a no-op.
func (s *Store) Close() error {
	s.life.Lock()
	defer s.life.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	err := s.db.Close()
	s.cache.Unref()
	if err != nil {
		return fmt.Errorf("pebble store: close: %w", err)
	}
	return nil
}

// Flush writes the memtables out to sstables (and waits). Not needed for
// durability — every write is already synced to the WAL — but useful
// before a file-level backup and for benchmarks that should read from
// sstables rather than the memtable.
func (s *Store) Flush() error {
	if err := s.begin(context.Background()); err != nil {
		return err
	}
	defer s.end()
	if err := s.db.Flush(); err != nil {
		return wrapErr("flush", err)
	}
	return nil
}

// bucketOf maps a message of a channel to its bucket. It is the single
// seam for per-channel bucket widths: today every channel uses the store's
// width. Whatever it becomes, it must be non-decreasing in id within a
// channel, because history reads walk buckets in bucket order.
func (s *Store) bucketOf(_ snowflake.ID, id snowflake.ID) int64 {
	return store.Bucket(id, s.bucketWidth)
}

func (s *Store) chLock(ch snowflake.ID) *sync.RWMutex { return &s.chLocks[s.chStripe(ch)] }

func (s *Store) chStripe(ch snowflake.ID) int {
	var h maphash.Hash
	h.SetSeed(s.seed)
	var b [8]byte
	for i := range b {
		b[i] = byte(ch >> (8 * i))
	}
	h.Write(b[:])
	return int(h.Sum64() % uint64(len(s.chLocks)))
}

// get reads one key; missing keys are store.ErrNotFound wrapped with what.
func (s *Store) get(k []byte, what string, fn func([]byte) error) error {
	v, closer, err := s.db.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	if err != nil {
		return wrapErr("get "+what, err)
	}
	defer closer.Close()
	return fn(v)
}

// exists reports whether k is present.
func (s *Store) exists(k []byte) (bool, error) {
	_, closer, err := s.db.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, wrapErr("get", err)
	}
	closer.Close()
	return true, nil
}

// commit applies b durably and closes it.
func (s *Store) commit(b *pebble.Batch, op string) error {
	defer b.Close()
	if err := b.Commit(pebble.Sync); err != nil {
		return wrapErr(op, err)
	}
	return nil
}

// scan calls fn for every key with prefix p, in key order. fn must copy
// what it keeps.
func (s *Store) scan(p []byte, fn func(k, v []byte) error) error {
	return scanReader(s.db, p, fn)
}

// scanReader calls fn for every key of r with prefix p, in key order.
func scanReader(r pebble.Reader, p []byte, fn func(k, v []byte) error) error {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return wrapErr("scan", err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		if err := fn(it.Key(), it.Value()); err != nil {
			it.Close()
			return err
		}
	}
	if err := it.Close(); err != nil {
		return wrapErr("scan", err)
	}
	return nil
}

// wrapErr gives a Pebble error context; a closed database reads as
// store.ErrUnavailable.
func wrapErr(op string, err error) error {
	if errors.Is(err, pebble.ErrClosed) {
		return fmt.Errorf("pebble store: %s: %w: %w", op, store.ErrUnavailable, err)
	}
	return fmt.Errorf("pebble store: %s: %w", op, err)
}

// begin starts an operation: it fails when ctx is done or the store is
// closed, and otherwise holds off Close until the matching end.
func (s *Store) begin(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("pebble store: %w", err)
	}
	s.life.RLock()
	if s.closed {
		s.life.RUnlock()
		return fmt.Errorf("pebble store: closed: %w", store.ErrUnavailable)
	}
	return nil
}

func (s *Store) end() { s.life.RUnlock() }

// slogLogger adapts slog to pebble.Logger.
type slogLogger struct{ l *slog.Logger }

func (l slogLogger) Infof(format string, args ...any) {
	l.l.Info(fmt.Sprintf(format, args...))
}

func (l slogLogger) Errorf(format string, args ...any) {
	l.l.Error(fmt.Sprintf(format, args...))
}

func (l slogLogger) Fatalf(format string, args ...any) {
	l.l.Error(fmt.Sprintf(format, args...))
	os.Exit(1)
}
