package cassandra

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Per-channel bucket widths.
//
// A channel's widths are rows of channel_bucket_widths: (from_message_id,
// width_ms). A message belongs to the row with the greatest
// from_message_id <= its id, or to Config.DefaultBucketWidth when there is
// none; its bucket is store.Bucket(id, width). A new width applies only
// from a message id in the future, so no existing row ever moves.
//
// Widths only narrow, and a new width must give its first bucket a number
// greater than the last bucket of the previous width (checked by
// SetBucketWidth). So bucket numbers grow with message ids across width
// changes: a channel's buckets, sorted, are its history in order, and
// history reads walk them without caring where the width changed.

// widthSpan is one row of channel_bucket_widths.
type widthSpan struct {
	from  snowflake.ID
	width time.Duration
}

// widths is a channel's spans, newest (greatest from) first.
type widths []widthSpan

// bucket returns id's bucket under ws, with def for ids before every span.
func (ws widths) bucket(id snowflake.ID, def time.Duration) int64 {
	return store.Bucket(id, ws.widthAt(id, def))
}

func (ws widths) widthAt(id snowflake.ID, def time.Duration) time.Duration {
	for _, w := range ws {
		if id >= w.from {
			return w.width
		}
	}
	return def
}

// widthCache keeps each channel's widths for ttl.
type widthCache struct {
	def time.Duration
	ttl time.Duration

	mu sync.Mutex
	m  map[snowflake.ID]widthEntry
}

type widthEntry struct {
	ws      widths
	fetched time.Time
}

const maxCachedChannels = 200_000

func newWidthCache(def, ttl time.Duration) *widthCache {
	return &widthCache{def: def, ttl: ttl, m: map[snowflake.ID]widthEntry{}}
}

func (c *widthCache) get(ch snowflake.ID) (widths, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[ch]
	if !ok || time.Since(e.fetched) > c.ttl {
		return nil, false
	}
	return e.ws, true
}

func (c *widthCache) put(ch snowflake.ID, ws widths) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= maxCachedChannels {
		clear(c.m) // crude, but bounded; entries are cheap to refetch
	}
	c.m[ch] = widthEntry{ws: ws, fetched: time.Now()}
}

func (c *widthCache) forget(ch snowflake.ID) {
	c.mu.Lock()
	delete(c.m, ch)
	c.mu.Unlock()
}

// channelWidths returns ch's width spans, from the cache when fresh.
func (s *Store) channelWidths(ctx context.Context, ch snowflake.ID) (widths, error) {
	if ws, ok := s.widths.get(ch); ok {
		return ws, nil
	}
	iter := s.session.Query(`SELECT from_message_id, width_ms FROM channel_bucket_widths WHERE channel_id = ?`,
		int64(ch)).IterContext(ctx)
	var ws widths
	var from, w int64
	for iter.Scan(&from, &w) {
		ws = append(ws, widthSpan{from: snowflake.ID(from), width: time.Duration(w) * time.Millisecond})
	}
	if err := iter.Close(); err != nil {
		return nil, wrapErr("read bucket widths", err)
	}
	s.widths.put(ch, ws)
	return ws, nil
}

// bucketOf returns the bucket of message id in channel ch.
func (s *Store) bucketOf(ctx context.Context, ch, id snowflake.ID) (int64, error) {
	ws, err := s.channelWidths(ctx, ch)
	if err != nil {
		return 0, err
	}
	return ws.bucket(id, s.cfg.DefaultBucketWidth), nil
}

// BucketWidth returns the width channel ch uses for message id.
func (s *Store) BucketWidth(ctx context.Context, ch, id snowflake.ID) (time.Duration, error) {
	ws, err := s.channelWidths(ctx, ch)
	if err != nil {
		return 0, err
	}
	return ws.widthAt(id, s.cfg.DefaultBucketWidth), nil
}

// SetBucketWidth makes channel ch use width for messages with ids >= from.
// from must be later than every span already recorded and at least three
// width-cache TTLs in the future (so every process has reloaded the
// channel's widths before the first message it applies to), and width must
// be narrower than the width in force at from, with a first bucket number
// above the last bucket of the previous width. Use NarrowFrom to pick from.
func (s *Store) SetBucketWidth(ctx context.Context, ch, from snowflake.ID, width time.Duration, reason string) error {
	s.widths.forget(ch)
	ws, err := s.channelWidths(ctx, ch)
	if err != nil {
		return err
	}
	if earliest := snowflake.FromTime(time.Now().Add(3 * s.cfg.WidthCacheTTL)); from < earliest {
		return fmt.Errorf("%w: from %v is less than 3 cache TTLs ahead", ErrWidth, from)
	}
	if len(ws) > 0 && from <= ws[0].from {
		return fmt.Errorf("%w: from %v is not after the last change at %v", ErrWidth, from, ws[0].from)
	}
	prev := ws.widthAt(from, s.cfg.DefaultBucketWidth)
	if width < time.Second || width >= prev {
		return fmt.Errorf("%w: %v is not narrower than %v (minimum 1s)", ErrWidth, width, prev)
	}
	if store.Bucket(from, width) <= store.Bucket(from-1, prev) {
		return fmt.Errorf("%w: %v after %v would reuse bucket numbers", ErrWidth, width, prev)
	}
	err = s.session.Query(`INSERT INTO channel_bucket_widths (channel_id, from_message_id, width_ms, reason)
		VALUES (?, ?, ?, ?)`, int64(ch), int64(from), width.Milliseconds(), reason).ExecContext(ctx)
	s.widths.forget(ch)
	if err != nil {
		return wrapErr("set bucket width", err)
	}
	s.log.Info("channel bucket narrowed", "channel_id", ch, "from_message_id", from,
		"width", width, "previous", prev, "reason", reason)
	return nil
}

// NarrowFrom returns the first message id a width change made now may
// apply from: three width-cache TTLs ahead.
func (s *Store) NarrowFrom(now time.Time) snowflake.ID {
	return snowflake.FromTime(now.Add(3*s.cfg.WidthCacheTTL + time.Second))
}
