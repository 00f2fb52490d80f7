package liverole

import (
	"context"

	"github.com/concord-chat/concord/runtime/eventlog"
	"github.com/concord-chat/concord/runtime/live"
)

// replayGroup is the event log as the router of `concord dev` consumes
// it: the comments group never commits, so every start of the process
// reads the comments topic from its oldest record. The in-process recent
// cache dies with the process; replaying the persisted log refills it
// (the newest 500 events of each stream, retractions applied), so the
// snapshot a viewer gets after a restart is the one it got before. The
// relay has no subscriber yet while the replay runs, and a gateway drops
// what it already sent by seq. Other groups (reactions) commit as usual.
type replayGroup struct {
	live.Consumer
	group string
}

func (r replayGroup) Consume(ctx context.Context, group string, topics []string, h eventlog.Handler) error {
	if group == r.group {
		h = noCommit{h}
	}
	return r.Consumer.Consume(ctx, group, topics, h)
}

// noCommit hands its Handler sessions whose marks and commits are
// dropped.
type noCommit struct{ eventlog.Handler }

func (n noCommit) Setup(ctx context.Context, s eventlog.Session) error {
	return n.Handler.Setup(ctx, uncommitted{s})
}

func (n noCommit) ConsumeClaim(ctx context.Context, s eventlog.Session, c eventlog.Claim) error {
	return n.Handler.ConsumeClaim(ctx, uncommitted{s}, c)
}

func (n noCommit) Cleanup(ctx context.Context, s eventlog.Session) error {
	return n.Handler.Cleanup(ctx, uncommitted{s})
}

type uncommitted struct{ eventlog.Session }

func (uncommitted) Mark(string, int32, int64)    {}
func (uncommitted) Commit(context.Context) error { return nil }
