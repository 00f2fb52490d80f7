package pebble

import (
	"context"
	"encoding/binary"

	"github.com/cockroachdb/pebble"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// MessageChannels returns up to limit ids of channels with at least one
// message, ascending, each > after and (when before != 0) < before. It
// lets `concord migrate` walk the store by channel ranges.
func (s *Store) MessageChannels(ctx context.Context, after, before snowflake.ID, limit int) ([]snowflake.ID, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.end()
	upper := []byte{tagBucket + 1}
	if before != 0 {
		upper = key1(tagBucket, before)
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: key1(tagBucket, after+1), UpperBound: upper})
	if err != nil {
		return nil, wrapErr("list channels", err)
	}
	var out []snowflake.ID
	for ok := it.First(); ok && len(out) < limit; {
		ch := snowflake.ID(binary.BigEndian.Uint64(it.Key()[1:9]))
		out = append(out, ch)
		ok = it.SeekGE(key1(tagBucket, ch+1))
	}
	if err := it.Close(); err != nil {
		return nil, wrapErr("list channels", err)
	}
	return out, nil
}
