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

// Shard returns the shard of comment id among shards.
func Shard(id snowflake.ID, shards int) int {
	if shards <= 1 {
		return 0
	}
	return int(uint64(id) % uint64(shards))
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
