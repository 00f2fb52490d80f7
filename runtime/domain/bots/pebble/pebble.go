// Package pebble stores the bot platform's records (bots.Store) in a local
// Pebble database, for single-process deployments, development and tests.
//
// Every write is committed with pebble.Sync. Keys are a one-byte table
// prefix followed by big-endian ids, so a table scan is ordered by id:
//
//	'a' app                    → application
//	'b' bot user               → application id
//	'o' owner, app             → (index)
//	'c' app, guild, command    → command (guild 0: global)
//	'g' guild, app             → installation
//	'i' interaction            → interaction
//
// Values are JSON. Read-modify-writes (CreateApplication,
// UpdateInteraction) are serialised by a mutex.
package pebble

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"github.com/cockroachdb/pebble"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/bots"
)

// Config configures a Store.
type Config struct {
	// Dir is the database directory, created if missing. Required.
	Dir string
	// Logger receives Pebble's log lines (default: discard).
	Logger *slog.Logger
}

// Store is bots.Store on Pebble. It is safe for concurrent use.
type Store struct {
	db  *pebble.DB
	log *slog.Logger
	// mu serialises read-modify-writes.
	mu sync.Mutex
	// life guards closed: operations hold it shared, Close exclusively.
	life   sync.RWMutex
	closed bool
}

var _ bots.Store = (*Store)(nil)

// New opens (or creates) the database in cfg.Dir.
func New(cfg Config) (*Store, error) {
	if cfg.Dir == "" {
		return nil, errors.New("bots pebble: Config.Dir is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("bots pebble: create %s: %w", cfg.Dir, err)
	}
	log := cfg.Logger.With("component", "bots-pebble", "dir", cfg.Dir)
	db, err := pebble.Open(cfg.Dir, &pebble.Options{Logger: slogLogger{log}})
	if err != nil {
		return nil, fmt.Errorf("bots pebble: open %s: %w", cfg.Dir, err)
	}
	return &Store{db: db, log: log}, nil
}

// Close closes the database; later calls fail with bots.ErrUnavailable.
func (s *Store) Close() error {
	s.life.Lock()
	defer s.life.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("bots pebble: close: %w", err)
	}
	return nil
}

// slogLogger adapts slog to Pebble's logger.
type slogLogger struct{ l *slog.Logger }

func (s slogLogger) Infof(format string, args ...any)  { s.l.Info(fmt.Sprintf(format, args...)) }
func (s slogLogger) Errorf(format string, args ...any) { s.l.Error(fmt.Sprintf(format, args...)) }
func (s slogLogger) Fatalf(format string, args ...any) {
	s.l.Error(fmt.Sprintf(format, args...))
	os.Exit(1)
}

// key builds a table key from ids.
func key(table byte, ids ...snowflake.ID) []byte {
	k := make([]byte, 1, 1+8*len(ids))
	k[0] = table
	for _, id := range ids {
		k = binary.BigEndian.AppendUint64(k, uint64(id))
	}
	return k
}

// upper returns the smallest key above every key with prefix p.
func upper(p []byte) []byte {
	u := append([]byte(nil), p...)
	for i := len(u) - 1; i >= 0; i-- {
		if u[i] < 0xff {
			u[i]++
			return u[:i+1]
		}
	}
	return nil
}

// op runs fn while the store is open.
func (s *Store) op(fn func() error) error {
	s.life.RLock()
	defer s.life.RUnlock()
	if s.closed {
		return fmt.Errorf("%w: store closed", bots.ErrUnavailable)
	}
	return fn()
}

func (s *Store) get(k []byte, v any) error {
	b, closer, err := s.db.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return bots.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("%w: %w", bots.ErrUnavailable, err)
	}
	defer closer.Close()
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("bots pebble: decode %x: %w", k, err)
	}
	return nil
}

func (s *Store) exists(k []byte) (bool, error) {
	_, closer, err := s.db.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%w: %w", bots.ErrUnavailable, err)
	}
	closer.Close()
	return true, nil
}

func setJSON(b *pebble.Batch, k []byte, v any) error {
	val, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("bots pebble: encode: %w", err)
	}
	return b.Set(k, val, nil)
}

func (s *Store) commit(b *pebble.Batch) error {
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("%w: commit: %w", bots.ErrUnavailable, err)
	}
	return nil
}

// scan calls fn with each value under prefix, in key order.
func (s *Store) scan(prefix []byte, fn func(k, v []byte) error) error {
	return s.scanRange(prefix, upper(prefix), fn)
}

// scanRange calls fn with each value in [lo, hi), in key order.
func (s *Store) scanRange(lo, hi []byte, fn func(k, v []byte) error) error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return fmt.Errorf("%w: %w", bots.ErrUnavailable, err)
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		if err := fn(it.Key(), it.Value()); err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("%w: %w", bots.ErrUnavailable, err)
	}
	return nil
}

// list decodes every value under prefix into a slice.
func list[T any](s *Store, prefix []byte) ([]T, error) {
	var out []T
	err := s.scan(prefix, func(_, v []byte) error {
		var t T
		if err := json.Unmarshal(v, &t); err != nil {
			return fmt.Errorf("bots pebble: decode: %w", err)
		}
		out = append(out, t)
		return nil
	})
	return out, err
}

func wrapCtx(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", bots.ErrUnavailable, err)
	}
	return nil
}
