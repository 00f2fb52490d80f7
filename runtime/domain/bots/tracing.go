package bots

import (
	"context"

	"go.opentelemetry.io/otel/trace"

	"github.com/concord-chat/concord/runtime/adapters/tracing"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// An interaction's round trip — the member's POST /interactions, the
// INTERACTION_CREATE to the bot, the bot's callback and the response
// message reaching the member — is one trace: the invocation's span
// context is kept beside the interaction's acknowledgement timer, and
// the callback's span continues it (linked to the callback request's own
// span). The bot's request carries no trace context of ours (a bot
// library sends none), so the platform joins the two halves itself.
// Both requests go to the node owning the interaction's guild (the api
// role routes callbacks by the interaction's guild), so memory is where
// the timer already is; the entry goes with the timer, and a callback
// the node does not know (the guild moved, the process restarted) gets
// a trace of its own.

// rememberTrace keeps ctx's span for interaction id's callback, when it
// is sampled.
func (h *Handler) rememberTrace(ctx context.Context, id snowflake.ID) {
	tp := tracing.Traceparent(ctx)
	if tp == "" {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, armed := h.timers[id]; armed {
		h.traces[id] = tp
	}
}

// callbackSpan opens the span of interaction id's callback: in the
// invocation's trace when this node remembers it, else under ctx's.
func (h *Handler) callbackSpan(ctx context.Context, id snowflake.ID) (context.Context, trace.Span) {
	h.mu.Lock()
	tp := h.traces[id]
	h.mu.Unlock()
	return tracing.StartFollowing(ctx, tp, "interaction.callback")
}
