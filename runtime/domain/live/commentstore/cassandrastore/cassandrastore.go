// Package cassandrastore is the live.Store of split deployments: the
// comments store's layout (package commentstore) as Cassandra tables in
// the chat store's keyspace, on its session (runtime/adapters/store/cassandra).
//
//	live_streams            (id) -> the stream record
//	live_comments           ((stream_id, bucket, shard), seq DESC)
//	live_comments_by_video  ((stream_id, vbucket, shard), video_ts_ms, seq)
//	live_comment_ids        ((stream_id, comment_id)) -> the row's place
//	live_bucket_shards      ((stream_id), kind, bucket, shards)
//	live_buckets            ((stream_id), kind, bucket) -> shards (before version 2)
//
// A bucket's shard count is the largest it was written with (a stream
// turns sampled and back): readers take the largest of its
// live_bucket_shards rows and its live_buckets row, written by earlier
// versions and still written for them.
//
// A takedown updates retracted and reason in both comment tables; writes
// of a comment never set those columns, so a comment written again after
// its takedown (archiver redelivery) stays taken down.
package cassandrastore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/concord-chat/concord/runtime/adapters/store/cassandra"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live"
	"github.com/concord-chat/concord/runtime/domain/live/commentstore"
)

// Migrations are the live-comments tables, applied as their own set.
var Migrations = []cassandra.Migration{{
	Version: 1,
	Name:    "live comments",
	Stmts: []string{
		`CREATE TABLE IF NOT EXISTS live_streams (id bigint PRIMARY KEY, record text)`,
		`CREATE TABLE IF NOT EXISTS live_comments (
			stream_id bigint, bucket bigint, shard int, seq bigint,
			comment_id bigint, author_id bigint, author_name text, text text,
			video_ts_ms bigint, created_at timestamp, shadow boolean,
			retracted boolean, reason text,
			PRIMARY KEY ((stream_id, bucket, shard), seq)
		) WITH CLUSTERING ORDER BY (seq DESC)`,
		`CREATE TABLE IF NOT EXISTS live_comments_by_video (
			stream_id bigint, vbucket bigint, shard int, video_ts_ms bigint, seq bigint,
			comment_id bigint, author_id bigint, author_name text, text text,
			created_at timestamp, shadow boolean, retracted boolean, reason text,
			PRIMARY KEY ((stream_id, vbucket, shard), video_ts_ms, seq)
		)`,
		`CREATE TABLE IF NOT EXISTS live_comment_ids (
			stream_id bigint, comment_id bigint, bucket bigint, vbucket bigint, shard int,
			seq bigint, video_ts_ms bigint,
			PRIMARY KEY ((stream_id, comment_id))
		)`,
		`CREATE TABLE IF NOT EXISTS live_buckets (
			stream_id bigint, kind tinyint, bucket bigint, shards int,
			PRIMARY KEY ((stream_id), kind, bucket)
		)`,
	},
}, {
	// live_buckets holds one shard count per bucket, last write wins: a
	// stream that left sampled mode inside a bucket overwrote 16 with 1
	// and hid 15 of its sampled comments' shards. Here every count a
	// bucket was written with is its own row and readers take the
	// largest (1 divides into 16: shard(id, 1) = 0 is among them).
	// Readers also read live_buckets, so buckets written before this
	// version stay listed; writers keep raising it (never lowering it)
	// for readers of the previous version during a rollout.
	Version: 2,
	Name:    "live bucket shard counts",
	Stmts: []string{
		`CREATE TABLE IF NOT EXISTS live_bucket_shards (
			stream_id bigint, kind tinyint, bucket bigint, shards int,
			PRIMARY KEY ((stream_id), kind, bucket, shards)
		)`,
	},
}}

// Bucket index kinds.
const (
	kindCreated int8 = 0
	kindVideo   int8 = 1
)

// Store is a live.Store on Cassandra.
type Store struct {
	s *gocql.Session

	mu    sync.Mutex
	known map[bucketKey]bool // bucket index rows this process wrote
}

type bucketKey struct {
	stream snowflake.ID
	kind   int8
	bucket int64
	shards int
}

var _ live.Store = (*Store)(nil)

// New creates the tables (if missing) in st's keyspace and returns a Store
// on st's session. Close leaves st open.
func New(ctx context.Context, st *cassandra.Store) (*Store, error) {
	if err := st.Migrate(ctx, "live_schema_migrations", Migrations); err != nil {
		return nil, fmt.Errorf("live comments schema: %w", err)
	}
	return &Store{s: st.Session(), known: map[bucketKey]bool{}}, nil
}

// Close implements live.Store; the session belongs to the chat store.
func (s *Store) Close() error { return nil }

func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, gocql.ErrNotFound) {
		return live.ErrNotFound
	}
	if cassandra.IsUnavailable(err) {
		return fmt.Errorf("%w: cassandra %s: %v", live.ErrUnavailable, op, err)
	}
	return fmt.Errorf("cassandra %s: %w", op, err)
}

// PutStream implements live.Store.
func (s *Store) PutStream(ctx context.Context, st live.Stream) error {
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("encode stream: %w", err)
	}
	return wrap("put stream", s.s.Query(`INSERT INTO live_streams (id, record) VALUES (?, ?)`, int64(st.ID), string(b)).
		Idempotent(true).ExecContext(ctx))
}

// GetStream implements live.Store.
func (s *Store) GetStream(ctx context.Context, id snowflake.ID) (live.Stream, error) {
	var rec string
	if err := s.s.Query(`SELECT record FROM live_streams WHERE id = ?`, int64(id)).ScanContext(ctx, &rec); err != nil {
		return live.Stream{}, wrap("get stream", err)
	}
	var st live.Stream
	if err := json.Unmarshal([]byte(rec), &st); err != nil {
		return live.Stream{}, fmt.Errorf("decode stream %d: %w", id, err)
	}
	return st, nil
}

// PutComments implements live.Store; the rows of one call are written
// concurrently, a few at a time.
func (s *Store) PutComments(ctx context.Context, shards int, cs []live.Comment) error {
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	errs := make([]error, len(cs))
	for i := range cs {
		c := &cs[i]
		if c.VideoTSMs < 0 || c.Seq < 0 {
			return fmt.Errorf("%w: comment %d: negative seq or video ts", live.ErrInvalid, c.ID)
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = s.putComment(ctx, shards, c)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (s *Store) putComment(ctx context.Context, shards int, c *live.Comment) error {
	b, vb, sh := live.Bucket(c.CreatedAt), live.VideoBucket(c.VideoTSMs), commentstore.Shard(c.ID, shards)
	st, cid, aid := int64(c.StreamID), int64(c.ID), int64(c.Author.ID)
	if err := s.s.Query(`INSERT INTO live_comments (stream_id, bucket, shard, seq, comment_id, author_id, author_name, text, video_ts_ms, created_at, shadow)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, st, b, sh, c.Seq, cid, aid, c.Author.Username, c.Text, c.VideoTSMs, c.CreatedAt, c.Shadow).
		Idempotent(true).ExecContext(ctx); err != nil {
		return wrap("put comment", err)
	}
	if err := s.s.Query(`INSERT INTO live_comments_by_video (stream_id, vbucket, shard, video_ts_ms, seq, comment_id, author_id, author_name, text, created_at, shadow)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, st, vb, sh, c.VideoTSMs, c.Seq, cid, aid, c.Author.Username, c.Text, c.CreatedAt, c.Shadow).
		Idempotent(true).ExecContext(ctx); err != nil {
		return wrap("put replay row", err)
	}
	if err := s.s.Query(`INSERT INTO live_comment_ids (stream_id, comment_id, bucket, vbucket, shard, seq, video_ts_ms) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		st, cid, b, vb, sh, c.Seq, c.VideoTSMs).Idempotent(true).ExecContext(ctx); err != nil {
		return wrap("put comment id", err)
	}
	n := max(shards, 1)
	for _, k := range []bucketKey{{c.StreamID, kindCreated, b, n}, {c.StreamID, kindVideo, vb, n}} {
		s.mu.Lock()
		known := s.known[k]
		s.mu.Unlock()
		if known {
			continue
		}
		if err := s.s.Query(`INSERT INTO live_bucket_shards (stream_id, kind, bucket, shards) VALUES (?, ?, ?, ?)`,
			st, k.kind, k.bucket, n).Idempotent(true).ExecContext(ctx); err != nil {
			return wrap("put bucket shards", err)
		}
		// live_buckets, for readers of the previous version during a
		// rollout and read by this one too: raised, never lowered (a
		// count the previous version wrote there is the only record of
		// its shards).
		var prev int
		err := s.s.Query(`SELECT shards FROM live_buckets WHERE stream_id = ? AND kind = ? AND bucket = ?`,
			st, k.kind, k.bucket).ScanContext(ctx, &prev)
		if err != nil && !errors.Is(err, gocql.ErrNotFound) {
			return wrap("get bucket", err)
		}
		if n > prev {
			if err := s.s.Query(`INSERT INTO live_buckets (stream_id, kind, bucket, shards) VALUES (?, ?, ?, ?)`,
				st, k.kind, k.bucket, n).Idempotent(true).ExecContext(ctx); err != nil {
				return wrap("put bucket", err)
			}
		}
		s.mu.Lock()
		if len(s.known) > 100_000 {
			s.known = map[bucketKey]bool{}
		}
		s.known[k] = true
		s.mu.Unlock()
	}
	return nil
}

type place struct {
	bucket, vbucket, seq, vts int64
	shard                     int
}

func (s *Store) place(ctx context.Context, stream, id snowflake.ID) (place, error) {
	var p place
	err := s.s.Query(`SELECT bucket, vbucket, shard, seq, video_ts_ms FROM live_comment_ids WHERE stream_id = ? AND comment_id = ?`,
		int64(stream), int64(id)).ScanContext(ctx, &p.bucket, &p.vbucket, &p.shard, &p.seq, &p.vts)
	return p, wrap("get comment id", err)
}

// Retract implements live.Store.
func (s *Store) Retract(ctx context.Context, stream, id snowflake.ID, reason string) error {
	p, err := s.place(ctx, stream, id)
	if err != nil {
		return err
	}
	if err := s.s.Query(`UPDATE live_comments SET retracted = true, reason = ? WHERE stream_id = ? AND bucket = ? AND shard = ? AND seq = ?`,
		reason, int64(stream), p.bucket, p.shard, p.seq).Idempotent(true).ExecContext(ctx); err != nil {
		return wrap("retract", err)
	}
	return wrap("retract replay row", s.s.Query(`UPDATE live_comments_by_video SET retracted = true, reason = ?
		WHERE stream_id = ? AND vbucket = ? AND shard = ? AND video_ts_ms = ? AND seq = ?`,
		reason, int64(stream), p.vbucket, p.shard, p.vts, p.seq).Idempotent(true).ExecContext(ctx))
}

const cols = `seq, comment_id, author_id, author_name, text, video_ts_ms, created_at, shadow, retracted, reason`

func scanComment(it *gocql.Iter, stream snowflake.ID) (live.Comment, bool) {
	var (
		c            live.Comment
		cid, aid     int64
		shadow, retr *bool
		reason, name *string
		createdAt    time.Time
	)
	if !it.Scan(&c.Seq, &cid, &aid, &name, &c.Text, &c.VideoTSMs, &createdAt, &shadow, &retr, &reason) {
		return c, false
	}
	c.ID, c.StreamID, c.Author.ID = snowflake.ID(cid), stream, snowflake.ID(aid)
	c.CreatedAt = createdAt.UTC()
	if name != nil {
		c.Author.Username = *name
	}
	c.Shadow = shadow != nil && *shadow
	c.Retracted = retr != nil && *retr
	if reason != nil {
		c.Reason = *reason
	}
	return c, true
}

// GetComment implements live.Store.
func (s *Store) GetComment(ctx context.Context, stream, id snowflake.ID) (live.Comment, error) {
	p, err := s.place(ctx, stream, id)
	if err != nil {
		return live.Comment{}, err
	}
	it := s.s.Query(`SELECT `+cols+` FROM live_comments WHERE stream_id = ? AND bucket = ? AND shard = ? AND seq = ?`,
		int64(stream), p.bucket, p.shard, p.seq).IterContext(ctx)
	c, ok := scanComment(it, stream)
	if err := it.Close(); err != nil {
		return live.Comment{}, wrap("get comment", err)
	}
	if !ok {
		return live.Comment{}, live.ErrNotFound
	}
	return c, nil
}

type bucketShards struct {
	bucket int64
	shards int
}

// buckets lists a stream's buckets of kind in ascending order, each with
// the largest shard count it was written with, from both bucket tables.
func (s *Store) buckets(ctx context.Context, stream snowflake.ID, kind int8) ([]bucketShards, error) {
	most := map[int64]int{}
	for _, q := range []string{
		`SELECT bucket, shards FROM live_bucket_shards WHERE stream_id = ? AND kind = ?`,
		`SELECT bucket, shards FROM live_buckets WHERE stream_id = ? AND kind = ?`,
	} {
		it := s.s.Query(q, int64(stream), kind).IterContext(ctx)
		var b bucketShards
		for it.Scan(&b.bucket, &b.shards) {
			most[b.bucket] = max(most[b.bucket], b.shards)
		}
		if err := it.Close(); err != nil {
			return nil, wrap("list buckets", err)
		}
	}
	out := make([]bucketShards, 0, len(most))
	for b, n := range most {
		out = append(out, bucketShards{bucket: b, shards: n})
	}
	slices.SortFunc(out, func(x, y bucketShards) int { return cmp.Compare(x.bucket, y.bucket) })
	return out, nil
}

// List implements live.Store.
func (s *Store) List(ctx context.Context, stream snowflake.ID, pg live.Page) ([]live.Comment, error) {
	if pg.Limit <= 0 {
		return nil, fmt.Errorf("%w: limit %d", live.ErrInvalid, pg.Limit)
	}
	if pg.Replay {
		return s.replay(ctx, stream, pg)
	}
	bs, err := s.buckets(ctx, stream, kindCreated)
	if err != nil {
		return nil, err
	}
	var out []live.Comment
	for i := len(bs) - 1; i >= 0 && len(out) < pg.Limit; i-- {
		var page []live.Comment
		for sh := range bs[i].shards {
			q := `SELECT ` + cols + ` FROM live_comments WHERE stream_id = ? AND bucket = ? AND shard = ?`
			args := []any{int64(stream), bs[i].bucket, sh}
			if pg.Before > 0 {
				q += ` AND seq < ?`
				args = append(args, pg.Before)
			}
			got, err := s.scan(ctx, q, args, pg.Limit-len(out), stream, pg.Viewer)
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

func (s *Store) replay(ctx context.Context, stream snowflake.ID, pg live.Page) ([]live.Comment, error) {
	bs, err := s.buckets(ctx, stream, kindVideo)
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
			q := `SELECT ` + cols + ` FROM live_comments_by_video WHERE stream_id = ? AND vbucket = ? AND shard = ?`
			args := []any{int64(stream), b.bucket, sh}
			if pg.AfterVideoTS >= 0 {
				q += ` AND video_ts_ms > ?`
				args = append(args, pg.AfterVideoTS)
			}
			got, err := s.scan(ctx, q, args, pg.Limit-len(out), stream, pg.Viewer)
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

// scan reads up to limit visible comments, paging past hidden ones.
func (s *Store) scan(ctx context.Context, q string, args []any, limit int, stream, viewer snowflake.ID) ([]live.Comment, error) {
	it := s.s.Query(q, args...).PageSize(limit + 8).IterContext(ctx)
	var out []live.Comment
	for len(out) < limit {
		c, ok := scanComment(it, stream)
		if !ok {
			break
		}
		if commentstore.Visible(&c, viewer) {
			out = append(out, c)
		}
	}
	return out, wrap("list comments", it.Close())
}
