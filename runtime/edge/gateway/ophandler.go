package gateway

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/concord-chat/concord/runtime/domain/event"
)

// OpHandler handles one client opcode (3, 4, 8, 14 or 31) for identified
// sessions, so later features plug in without touching the connection loop.
// The op 3 handler also receives IDENTIFY's `presence` (when it is an
// object) right after the session is subscribed; its errors are then only
// logged.
type OpHandler interface {
	// HandleOp is called on the connection's reader goroutine, in arrival
	// order, with the payload's `d` (a JSON object; snowflakes in it may be
	// numbers or strings). ctx ends when the connection does. Returning a
	// *CloseError closes the connection with its code; other errors are
	// logged and the connection stays open. While op 4's handler runs,
	// what is delivered to the connection is held and then written
	// together (answer.go).
	HandleOp(ctx context.Context, s event.Session, op int, d json.RawMessage) error
}

// OpHandlerFunc adapts a function to OpHandler.
type OpHandlerFunc func(ctx context.Context, s event.Session, op int, d json.RawMessage) error

// HandleOp calls f.
func (f OpHandlerFunc) HandleOp(ctx context.Context, s event.Session, op int, d json.RawMessage) error {
	return f(ctx, s, op, d)
}

// CloseError asks the node to close a connection with a gateway close code.
type CloseError struct {
	Code   int
	Reason string
}

// Error describes the close.
func (e *CloseError) Error() string {
	return fmt.Sprintf("gateway: close %d: %s", e.Code, e.Reason)
}
