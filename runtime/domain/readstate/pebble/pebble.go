// Package pebble is the embedded read-state table: readstate.Store on a
// local Pebble database, for `concord dev` and tests. Its layout mirrors the
// Cassandra table: records keyed (user_id, channel_id), so one prefix scan
// loads a user, one key per user for the owner epoch its records are held
// at, and one row per channel for channel-level mentions. Claims and
// fenced writes compare the stored epoch under the store's lock, so the
// comparison and the write are one step for every caller of the process.
package pebble

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/vfs"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/readstate"
)

// Config configures a Store.
type Config struct {
	// Dir is the database directory, created if missing. Empty keeps the
	// database in memory (tests).
	Dir string
	// NoSync skips the fsync of each Write. Default false.
	NoSync bool
}

// Store is readstate.Store on Pebble.
type Store struct {
	db   *pebble.DB
	sync *pebble.WriteOptions
	mu   sync.Mutex // compare-and-write of owner epochs
}

var _ readstate.Store = (*Store)(nil)

// New opens the database.
func New(cfg Config) (*Store, error) {
	opts := &pebble.Options{}
	dir := cfg.Dir
	if dir == "" {
		opts.FS = vfs.NewMem()
		dir = "readstate"
	}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("readstate pebble: open %s: %w", dir, err)
	}
	w := pebble.Sync
	if cfg.NoSync {
		w = pebble.NoSync
	}
	return &Store{db: db, sync: w}, nil
}

func userKey(user, channel snowflake.ID) []byte {
	k := make([]byte, 17)
	k[0] = 'u'
	binary.BigEndian.PutUint64(k[1:], uint64(user))
	binary.BigEndian.PutUint64(k[9:], uint64(channel))
	return k
}

func epochKey(user snowflake.ID) []byte {
	k := make([]byte, 9)
	k[0] = 'e'
	binary.BigEndian.PutUint64(k[1:], uint64(user))
	return k
}

// epoch reads user's stored owner epoch (0: never claimed).
func (s *Store) epoch(user snowflake.ID) (int64, error) {
	v, closer, err := s.db.Get(epochKey(user))
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("readstate pebble: read epoch: %w", err)
	}
	defer closer.Close()
	if len(v) != 8 {
		return 0, fmt.Errorf("readstate pebble: epoch of user %d is %d bytes", user, len(v))
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

// Claim implements readstate.Store.
func (s *Store) Claim(ctx context.Context, user snowflake.ID, epoch int64) (int64, error) {
	if epoch <= 0 {
		return 0, fmt.Errorf("readstate pebble: claim at epoch %d", epoch)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	prev, err := s.epoch(user)
	if err != nil {
		return 0, err
	}
	switch {
	case prev > epoch:
		return prev, fmt.Errorf("%w: user %d held at %d, claimed at %d", readstate.ErrFenced, user, prev, epoch)
	case prev == epoch:
		return prev, nil
	}
	if err := s.db.Set(epochKey(user), binary.BigEndian.AppendUint64(nil, uint64(epoch)), s.sync); err != nil {
		return 0, fmt.Errorf("readstate pebble: claim: %w", err)
	}
	return prev, nil
}

func channelKey(channel snowflake.ID) []byte {
	k := make([]byte, 9)
	k[0] = 'c'
	binary.BigEndian.PutUint64(k[1:], uint64(channel))
	return k
}

// LoadUser implements readstate.Store.
func (s *Store) LoadUser(ctx context.Context, user snowflake.ID) ([]readstate.Record, error) {
	lo := userKey(user, 0)
	hi := userKey(user+1, 0)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, fmt.Errorf("readstate pebble: load user: %w", err)
	}
	defer it.Close()
	epoch, err := s.epoch(user)
	if err != nil {
		return nil, err
	}
	var out []readstate.Record
	for ok := it.First(); ok; ok = it.Next() {
		var r readstate.Record
		if err := json.Unmarshal(it.Value(), &r); err != nil {
			return nil, fmt.Errorf("readstate pebble: decode record: %w", err)
		}
		r.Epoch = epoch
		out = append(out, r)
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("readstate pebble: load user: %w", err)
	}
	return out, nil
}

// LoadChannel implements readstate.Store.
func (s *Store) LoadChannel(ctx context.Context, channel snowflake.ID) (readstate.ChannelRecord, bool, error) {
	v, closer, err := s.db.Get(channelKey(channel))
	if errors.Is(err, pebble.ErrNotFound) {
		return readstate.ChannelRecord{}, false, nil
	}
	if err != nil {
		return readstate.ChannelRecord{}, false, fmt.Errorf("readstate pebble: load channel: %w", err)
	}
	defer closer.Close()
	var r readstate.ChannelRecord
	if err := json.Unmarshal(v, &r); err != nil {
		return readstate.ChannelRecord{}, false, fmt.Errorf("readstate pebble: decode channel: %w", err)
	}
	return r, true, nil
}

// Write implements readstate.Store in one atomic batch: every user whose
// records carry its stored epoch, and the channels.
func (s *Store) Write(ctx context.Context, users []readstate.Record, channels []readstate.ChannelRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.db.NewBatch()
	defer b.Close()
	held := map[snowflake.ID]int64{}
	var fenced []snowflake.ID
	for _, r := range users {
		e, ok := held[r.UserID]
		if !ok {
			var err error
			if e, err = s.epoch(r.UserID); err != nil {
				return err
			}
			held[r.UserID] = e
			if e != r.Epoch {
				fenced = append(fenced, r.UserID)
			}
		}
		if e != r.Epoch {
			continue
		}
		r.Epoch = 0 // kept under the user's epoch key
		v, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("readstate pebble: encode record: %w", err)
		}
		if err := b.Set(userKey(r.UserID, r.ChannelID), v, nil); err != nil {
			return fmt.Errorf("readstate pebble: write: %w", err)
		}
	}
	for _, r := range channels {
		v, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("readstate pebble: encode channel: %w", err)
		}
		if err := b.Set(channelKey(r.ChannelID), v, nil); err != nil {
			return fmt.Errorf("readstate pebble: write: %w", err)
		}
	}
	if err := b.Commit(s.sync); err != nil {
		return fmt.Errorf("readstate pebble: commit: %w", err)
	}
	if len(fenced) > 0 {
		return &readstate.FencedError{Users: fenced}
	}
	return nil
}

// Close implements readstate.Store.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("readstate pebble: close: %w", err)
	}
	return nil
}
