// Package commentstore holds what the two live.Store adapters share: the
// layout both follow and the merge of a sampled stream's shards.
//
// Layout. Comments are partitioned by (stream_id, 10-minute bucket of the
// comment's creation, shard) and clustered by seq; a replay index holds
// the same rows partitioned by (stream_id, 10-minute bucket of the video
// timestamp, shard) and clustered by (video_ts_ms, seq); an id index maps
// (stream_id, comment_id) to the row's place; and two bucket indexes list
// the non-empty buckets of each stream with their shard count, so reads
// walk only buckets that hold comments. A stream that is not sampled has
// one shard; a sampled one has live.SampledShards, chosen by comment id.
// Takedowns rewrite both rows with retracted=true and the reason.
package commentstore

import (
	"sort"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live"
)

// Shard returns the shard of comment id among shards: a mix of all of
// the id's bits (splitmix64's finaliser), not id mod shards, whose low
// bits are the snowflake's per-millisecond sequence — 0 for nearly every
// comment of a stream posting fewer than one per millisecond per API
// process, which put a sampled stream's comments all in shard 0. Reads
// never recompute it (the id index keeps each comment's shard, listings
// walk every shard of a bucket), and no stream was written with more
// than one shard before it changed.
func Shard(id snowflake.ID, shards int) int {
	if shards <= 1 {
		return 0
	}
	x := uint64(id)
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return int(x % uint64(shards))
}

// Visible reports whether a listing shows c to viewer.
func Visible(c *live.Comment, viewer snowflake.ID) bool {
	return !c.Retracted && (!c.Shadow || (viewer != 0 && c.Author.ID == viewer))
}

// SortDesc orders comments newest seq first.
func SortDesc(cs []live.Comment) {
	sort.Slice(cs, func(i, j int) bool { return cs[i].Seq > cs[j].Seq })
}

// SortReplay orders comments by (video_ts_ms, seq) ascending.
func SortReplay(cs []live.Comment) {
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].VideoTSMs != cs[j].VideoTSMs {
			return cs[i].VideoTSMs < cs[j].VideoTSMs
		}
		return cs[i].Seq < cs[j].Seq
	})
}
