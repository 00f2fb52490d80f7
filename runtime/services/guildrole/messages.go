package guildrole

import (
	"log/slog"

	"github.com/concord-chat/concord/runtime/adapters/eventlog/outbox"
	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/services/wiring"
)

// messageWriter is the process's message write path for the guild
// service: the Writer of the event log's outbox (wiring.Outbox, which the
// root provides when the process has an event log) over st — the store's
// own outbox when it has one —, or the store alone without an event log.
func messageWriter(seams *wiring.Seams, st store.Messages, log *slog.Logger) outbox.Writer {
	ob, ok := wiring.Lookup(seams, wiring.Outbox)
	if !ok || ob == nil {
		return outbox.Unlogged(st)
	}
	return outbox.NewWriter(st, ob, log)
}
