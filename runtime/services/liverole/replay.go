package liverole

import (
	"context"
	"fmt"
	"sync"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/domain/live"
)

// replayGroup is the event log as the router of `concord dev` consumes
// it: the comments group never commits, so every start of the process
// reads the comments topic from its oldest record. The in-process recent
// cache dies with the process; replaying the persisted log refills it
// (the newest 500 events of each stream, retractions applied), so the
// snapshot a viewer gets after a restart is the one it got before. The
// relay has no subscriber yet while the replay runs, and a gateway drops
// what it already sent by seq. Other groups (reactions) commit as usual.
//
// The router marks a partition up to an offset once everything before it
// is in the recent cache; Ready holds the process unready until the marks
// pass where each partition ended at start.
type replayGroup struct {
	live.Consumer
	group string

	mu      sync.Mutex
	pending map[int32]int64 // partition -> end at start, until marked past
}

// newReplayGroup reads where topic's partitions end now.
func newReplayGroup(ctx context.Context, c live.Consumer, group, topic string) (*replayGroup, error) {
	r := &replayGroup{Consumer: c, group: group, pending: map[int32]int64{}}
	in, ok := c.(eventlog.Inspector)
	if !ok {
		return nil, fmt.Errorf("live: the event log %T cannot report partition ends", c)
	}
	// A first start on a fresh Kafka has no topic yet: create it with the
	// partitions the API pins streams to, so its end is known (zero).
	if pinned, ok := c.(eventlog.Pinned); ok {
		if _, err := pinned.Partitions(ctx, topic); err != nil {
			return nil, fmt.Errorf("live: partitions of %s: %w", topic, err)
		}
	}
	ends, err := in.End(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("live: end of %s: %w", topic, err)
	}
	for p, end := range ends {
		if end > 0 {
			r.pending[int32(p)] = end
		}
	}
	return r, nil
}

// Ready reports whether the replay has refilled the recent cache.
func (r *replayGroup) Ready() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := len(r.pending); n > 0 {
		return fmt.Errorf("live router: replaying %d partitions into the recent cache", n)
	}
	return nil
}

func (r *replayGroup) marked(partition int32, next int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if end, ok := r.pending[partition]; ok && next >= end {
		delete(r.pending, partition)
	}
}

func (r *replayGroup) Consume(ctx context.Context, group string, topics []string, h eventlog.Handler) error {
	if group == r.group {
		h = noCommit{Handler: h, r: r}
	}
	return r.Consumer.Consume(ctx, group, topics, h)
}

// noCommit hands its Handler sessions whose marks are only counted and
// whose commits are dropped.
type noCommit struct {
	eventlog.Handler
	r *replayGroup
}

func (n noCommit) Setup(ctx context.Context, s eventlog.Session) error {
	return n.Handler.Setup(ctx, uncommitted{s, n.r})
}

func (n noCommit) ConsumeClaim(ctx context.Context, s eventlog.Session, c eventlog.Claim) error {
	return n.Handler.ConsumeClaim(ctx, uncommitted{s, n.r}, c)
}

func (n noCommit) Cleanup(ctx context.Context, s eventlog.Session) error {
	return n.Handler.Cleanup(ctx, uncommitted{s, n.r})
}

type uncommitted struct {
	eventlog.Session
	r *replayGroup
}

func (u uncommitted) Mark(_ string, partition int32, next int64) { u.r.marked(partition, next) }
func (uncommitted) Commit(context.Context) error                 { return nil }
