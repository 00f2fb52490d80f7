// Package pebblestore is the live.Store of `concord dev`: the comments
// store's layout (package commentstore) as keys of a local Pebble
// database, every write synced before it returns so that an acknowledged
// write survives kill -9.
package pebblestore

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/cockroachdb/pebble"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live"
	"github.com/concord-chat/concord/runtime/domain/live/commentstore"
)

// Key spaces, all under "live/" so the database can be shared.
const (
	kStream  = "live/s/"  // stream -> Stream JSON
	kComment = "live/c/"  // stream, bucket, shard, seq -> Comment JSON
	kReplay  = "live/v/"  // stream, vbucket, shard, vts, seq -> Comment JSON
	kID      = "live/i/"  // stream, comment id -> place
	kBucket  = "live/b/"  // stream, bucket -> shards
	kVBucket = "live/vb/" // stream, vbucket -> shards
)

// Store is a live.Store on Pebble.
type Store struct {
	db    *pebble.DB
	owned bool
	// mu serialises read-modify-writes (soft deletes, index upkeep).
	mu sync.Mutex
}

var _ live.Store = (*Store)(nil)

// Open opens (or creates) a database in dir.
func Open(dir string, logger *slog.Logger) (*Store, error) {
	if dir == "" {
		return nil, fmt.Errorf("%w: pebblestore: empty dir", live.ErrInvalid)
	}
	if logger == nil {
		logger = slog.Default()
	}
	db, err := pebble.Open(dir, &pebble.Options{Logger: pebbleLogger{logger}})
	if err != nil {
		return nil, fmt.Errorf("pebblestore: open %s: %w", dir, err)
	}
	return &Store{db: db, owned: true}, nil
}

// New uses an open database (for instance the chat store's); Close then
// leaves it open.
func New(db *pebble.DB) *Store { return &Store{db: db} }

type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any)  { p.l.Debug(fmt.Sprintf(format, args...)) }
func (p pebbleLogger) Errorf(format string, args ...any) { p.l.Error(fmt.Sprintf(format, args...)) }
func (p pebbleLogger) Fatalf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...))
	panic(fmt.Sprintf(format, args...))
}

// Close implements live.Store.
func (s *Store) Close() error {
	if !s.owned {
		return nil
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("pebblestore: close: %w", err)
	}
	return nil
}

func key(prefix string, parts ...uint64) []byte {
	b := make([]byte, len(prefix), len(prefix)+8*len(parts))
	copy(b, prefix)
	for _, p := range parts {
		b = binary.BigEndian.AppendUint64(b, p)
	}
	return b
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

type place struct {
	Bucket  int64 `json:"b"`
	VBucket int64 `json:"vb"`
	Shard   int   `json:"sh"`
	Seq     int64 `json:"q"`
	VTS     int64 `json:"v"`
}

func (p place) commentKey(stream snowflake.ID) []byte {
	return key(kComment, uint64(stream), uint64(p.Bucket), uint64(p.Shard), uint64(p.Seq))
}

func (p place) replayKey(stream snowflake.ID) []byte {
	return key(kReplay, uint64(stream), uint64(p.VBucket), uint64(p.Shard), uint64(p.VTS), uint64(p.Seq))
}

// PutStream implements live.Store.
func (s *Store) PutStream(ctx context.Context, st live.Stream) error {
	v, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("pebblestore: encode stream: %w", err)
	}
	if err := s.db.Set(key(kStream, uint64(st.ID)), v, pebble.Sync); err != nil {
		return fmt.Errorf("%w: pebblestore: put stream: %v", live.ErrUnavailable, err)
	}
	return nil
}

// GetStream implements live.Store.
func (s *Store) GetStream(ctx context.Context, id snowflake.ID) (live.Stream, error) {
	var st live.Stream
	err := s.get(key(kStream, uint64(id)), &st)
	return st, err
}

func (s *Store) get(k []byte, v any) error {
	b, closer, err := s.db.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return live.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("%w: pebblestore: get: %v", live.ErrUnavailable, err)
	}
	defer closer.Close()
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("pebblestore: decode: %w", err)
	}
	return nil
}

// PutComments implements live.Store.
func (s *Store) PutComments(ctx context.Context, shards int, cs []live.Comment) error {
	if len(cs) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.db.NewBatch()
	defer b.Close()
	pending := map[string]uint64{} // bucket keys set in b
	for i := range cs {
		c := cs[i]
		if c.VideoTSMs < 0 || c.Seq < 0 {
			return fmt.Errorf("%w: comment %d: negative seq or video ts", live.ErrInvalid, c.ID)
		}
		var old place
		if err := s.get(key(kID, uint64(c.StreamID), uint64(c.ID)), &old); err == nil {
			// Already stored: keep a soft delete that got there first.
			var prev live.Comment
			if s.get(old.commentKey(c.StreamID), &prev) == nil && prev.Retracted {
				c.Retracted, c.Reason = true, prev.Reason
			}
		}
		p := place{Bucket: live.Bucket(c.CreatedAt), VBucket: live.VideoBucket(c.VideoTSMs),
			Shard: commentstore.Shard(c.ID, shards), Seq: c.Seq, VTS: c.VideoTSMs}
		v, err := json.Marshal(c)
		if err != nil {
			return fmt.Errorf("pebblestore: encode comment: %w", err)
		}
		pv, _ := json.Marshal(p)
		b.Set(p.commentKey(c.StreamID), v, nil)
		b.Set(p.replayKey(c.StreamID), v, nil)
		b.Set(key(kID, uint64(c.StreamID), uint64(c.ID)), pv, nil)
		for _, bk := range [][]byte{key(kBucket, uint64(c.StreamID), uint64(p.Bucket)), key(kVBucket, uint64(c.StreamID), uint64(p.VBucket))} {
			// A bucket's shard count only grows: a stream that leaves
			// sampled mode keeps its sampled comments' shards listed.
			n, err := s.bucketShards(bk, pending)
			if err != nil {
				return err
			}
			if want := uint64(max(shards, 1)); want > n {
				pending[string(bk)] = want
				b.Set(bk, binary.BigEndian.AppendUint64(nil, want), nil)
			}
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("%w: pebblestore: put comments: %v", live.ErrUnavailable, err)
	}
	return nil
}

// bucketShards is the shard count a bucket key holds, in pending (this
// batch) or the database; 0 for a bucket not written yet.
func (s *Store) bucketShards(k []byte, pending map[string]uint64) (uint64, error) {
	if n, ok := pending[string(k)]; ok {
		return n, nil
	}
	v, closer, err := s.db.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("%w: pebblestore: get bucket: %v", live.ErrUnavailable, err)
	}
	defer closer.Close()
	if len(v) != 8 {
		return 0, nil
	}
	return binary.BigEndian.Uint64(v), nil
}

// Retract implements live.Store.
func (s *Store) Retract(ctx context.Context, streamID, commentID snowflake.ID, reason string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var p place
	if err := s.get(key(kID, uint64(streamID), uint64(commentID)), &p); err != nil {
		return err
	}
	var c live.Comment
	if err := s.get(p.commentKey(streamID), &c); err != nil {
		return err
	}
	c.Retracted, c.Reason = true, reason
	v, _ := json.Marshal(c)
	b := s.db.NewBatch()
	defer b.Close()
	b.Set(p.commentKey(streamID), v, nil)
	b.Set(p.replayKey(streamID), v, nil)
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("%w: pebblestore: retract: %v", live.ErrUnavailable, err)
	}
	return nil
}

// GetComment implements live.Store.
func (s *Store) GetComment(ctx context.Context, streamID, commentID snowflake.ID) (live.Comment, error) {
	var p place
	if err := s.get(key(kID, uint64(streamID), uint64(commentID)), &p); err != nil {
		return live.Comment{}, err
	}
	var c live.Comment
	err := s.get(p.commentKey(streamID), &c)
	return c, err
}

type bucketShards struct {
	bucket int64
	shards int
}

// buckets lists a stream's buckets of one index, ascending.
func (s *Store) buckets(prefix string, stream snowflake.ID) ([]bucketShards, error) {
	lo := key(prefix, uint64(stream))
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: upper(lo)})
	if err != nil {
		return nil, fmt.Errorf("%w: pebblestore: iter: %v", live.ErrUnavailable, err)
	}
	defer it.Close()
	var out []bucketShards
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()[len(lo):]
		out = append(out, bucketShards{int64(binary.BigEndian.Uint64(k)), int(binary.BigEndian.Uint64(it.Value()))})
	}
	return out, it.Error()
}

// List implements live.Store.
func (s *Store) List(ctx context.Context, stream snowflake.ID, pg live.Page) ([]live.Comment, error) {
	if pg.Limit <= 0 {
		return nil, fmt.Errorf("%w: limit %d", live.ErrInvalid, pg.Limit)
	}
	if pg.Replay {
		return s.replay(stream, pg)
	}
	bs, err := s.buckets(kBucket, stream)
	if err != nil {
		return nil, err
	}
	var out []live.Comment
	for i := len(bs) - 1; i >= 0 && len(out) < pg.Limit; i-- {
		var page []live.Comment
		for sh := range bs[i].shards {
			lo := key(kComment, uint64(stream), uint64(bs[i].bucket), uint64(sh))
			hi := upper(lo)
			if pg.Before > 0 {
				hi = key(kComment, uint64(stream), uint64(bs[i].bucket), uint64(sh), uint64(pg.Before))
			}
			got, err := s.scan(lo, hi, true, pg.Limit-len(out), pg.Viewer)
			if err != nil {
				return nil, err
			}
			page = append(page, got...)
		}
		commentstore.SortDesc(page)
		out = append(out, page[:min(len(page), pg.Limit-len(out))]...)
	}
	return out, nil
}

func (s *Store) replay(stream snowflake.ID, pg live.Page) ([]live.Comment, error) {
	bs, err := s.buckets(kVBucket, stream)
	if err != nil {
		return nil, err
	}
	from := live.VideoBucket(max(pg.AfterVideoTS, 0))
	var out []live.Comment
	for _, b := range bs {
		if b.bucket < from || len(out) >= pg.Limit {
			continue
		}
		var page []live.Comment
		for sh := range b.shards {
			pre := key(kReplay, uint64(stream), uint64(b.bucket), uint64(sh))
			lo := pre
			if pg.AfterVideoTS >= 0 {
				lo = key(kReplay, uint64(stream), uint64(b.bucket), uint64(sh), uint64(pg.AfterVideoTS+1))
			}
			got, err := s.scan(lo, upper(pre), false, pg.Limit-len(out), pg.Viewer)
			if err != nil {
				return nil, err
			}
			page = append(page, got...)
		}
		commentstore.SortReplay(page)
		out = append(out, page[:min(len(page), pg.Limit-len(out))]...)
	}
	return out, nil
}

func (s *Store) scan(lo, hi []byte, reverse bool, limit int, viewer snowflake.ID) ([]live.Comment, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, fmt.Errorf("%w: pebblestore: iter: %v", live.ErrUnavailable, err)
	}
	defer it.Close()
	var out []live.Comment
	valid := it.First()
	if reverse {
		valid = it.Last()
	}
	for ; valid && len(out) < limit; valid = step(it, reverse) {
		var c live.Comment
		if err := json.Unmarshal(it.Value(), &c); err != nil {
			return nil, fmt.Errorf("pebblestore: decode comment: %w", err)
		}
		if commentstore.Visible(&c, viewer) {
			out = append(out, c)
		}
	}
	return out, it.Error()
}

func step(it *pebble.Iterator, reverse bool) bool {
	if reverse {
		return it.Prev()
	}
	return it.Next()
}
