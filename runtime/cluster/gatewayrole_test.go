package cluster

import (
	"context"

	"github.com/concord-chat/concord/runtime/event"
)

// discardSink is the sink of a test's guild service that delivers
// nowhere.
type discardSink struct{}

func (discardSink) Deliver(context.Context, string, event.Batch) {}
