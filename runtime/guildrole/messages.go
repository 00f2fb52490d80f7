package guildrole

import (
	"log/slog"

	"github.com/concord-chat/concord/runtime/eventlog/outbox"
	"github.com/concord-chat/concord/runtime/role"
	"github.com/concord-chat/concord/runtime/store"
)

// Outbox is the event log's outbox, provided by the process that opened
// it (`concord dev`: the read path's; `concord serve`: the guild node's,
// with --eventlog=kafka://). The guild service writes every message
// change with its event through it (messageWriter); the REST API
// publishes through it the events it logs outside a message write.
var Outbox = role.Key[*outbox.Outbox]{Name: "eventlog/outbox"}

// messageWriter is the process's message write path for the guild
// service: the outbox's Writer over st (the store's own outbox when it has
// one), or the store alone when the process has no event log.
func messageWriter(seams *role.Seams, st store.Messages, log *slog.Logger) outbox.Writer {
	ob, ok := role.Lookup(seams, Outbox)
	if !ok || ob == nil {
		return outbox.Unlogged(st)
	}
	return outbox.NewWriter(st, ob, log)
}
