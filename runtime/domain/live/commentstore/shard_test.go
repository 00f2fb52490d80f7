package commentstore

import (
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live"
)

// Comments posted one at a time (snowflake sequence 0, one per
// millisecond) spread over the shards of a sampled stream.
func TestShardSpreadsSequentialIDs(t *testing.T) {
	seen := map[int]int{}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 256 {
		seen[Shard(snowflake.FromTime(at.Add(time.Duration(i)*time.Millisecond)), live.SampledShards)]++
	}
	if len(seen) != live.SampledShards {
		t.Fatalf("256 ids one per millisecond over %d of %d shards: %v", len(seen), live.SampledShards, seen)
	}
	for sh, n := range seen {
		if n > 40 {
			t.Fatalf("shard %d holds %d of 256: %v", sh, n, seen)
		}
	}
	if Shard(12345, 1) != 0 {
		t.Fatal("one shard is shard 0")
	}
}
