package dataservice

import (
	"cmp"
	"slices"
	"sync"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// topK counts requests per channel with the space-saving algorithm: at
// most k counters; a channel not tracked replaces the smallest one and
// inherits its count (so counts are upper bounds, exact for channels that
// stayed tracked). Hot channels, the ones that matter, are always tracked.
type topK struct {
	mu     sync.Mutex
	k      int
	counts map[snowflake.ID]*channelCount
}

type channelCount struct {
	requests  uint64
	coalesced uint64
}

// ChannelStat is one line of the top channels.
type ChannelStat struct {
	ChannelID snowflake.ID
	// Requests is an upper bound on the channel's requests.
	Requests uint64
	// Coalesced is how many of them joined an in-flight query.
	Coalesced uint64
}

func newTopK(k int) *topK { return &topK{k: k, counts: make(map[snowflake.ID]*channelCount, k)} }

func (t *topK) add(ch snowflake.ID, coalesced bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.counts[ch]
	if c == nil {
		if len(t.counts) >= t.k {
			var minID snowflake.ID
			var min *channelCount
			for id, cc := range t.counts {
				if min == nil || cc.requests < min.requests {
					minID, min = id, cc
				}
			}
			delete(t.counts, minID)
			c = &channelCount{requests: min.requests}
		} else {
			c = &channelCount{}
		}
		t.counts[ch] = c
	}
	c.requests++
	if coalesced {
		c.coalesced++
	}
}

func (t *topK) top(n int) []ChannelStat {
	t.mu.Lock()
	out := make([]ChannelStat, 0, len(t.counts))
	for id, c := range t.counts {
		out = append(out, ChannelStat{ChannelID: id, Requests: c.requests, Coalesced: c.coalesced})
	}
	t.mu.Unlock()
	slices.SortFunc(out, func(a, b ChannelStat) int {
		switch {
		case a.Requests > b.Requests:
			return -1
		case a.Requests < b.Requests:
			return 1
		}
		return cmp.Compare(a.ChannelID, b.ChannelID)
	})
	return out[:min(n, len(out))]
}
