package transport

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/domain/presence"
	"github.com/concord-chat/concord/runtime/domain/readstate"
	"github.com/concord-chat/concord/runtime/services/dataservice"
)

// Errors returned by the transport, wrapped with context.
var (
	// ErrInvalid means a request is malformed (missing session, zero id).
	ErrInvalid = errors.New("transport: invalid request")
	// ErrUnknownNode means the registry has no live node by that name.
	ErrUnknownNode = errors.New("transport: unknown node")
	// ErrNoOwner means no live node owns the guild.
	ErrNoOwner = errors.New("transport: no node owns the guild")
	// ErrNotOwner means the called node does not own the key of the call
	// (a guild, or the user of a read-state or presence call: the
	// caller's ring is stale); the client retries on the new owner.
	ErrNotOwner = errors.New("transport: key not owned by this node")
	// ErrWrongNode means a batch reached a gateway node it is not for.
	ErrWrongNode = errors.New("transport: batch for another node")
	// ErrUnavailable means the node could not be reached or is stopping.
	ErrUnavailable = errors.New("transport: node unavailable")
	// ErrNotServed means the node does not run the called service.
	ErrNotServed = errors.New("transport: service not served by this node")
)

// ErrorCode pairs an error with the gRPC code it travels as. Servers
// match errors with errors.Is in table order; clients turn a status
// carrying the same error text back into an error that matches Err.
type ErrorCode struct {
	Err  error
	Code codes.Code
}

// transportErrors is the transport's own part of the table; the domain's
// part (guild errors, for instance) comes from the configs and is
// consulted first.
var transportErrors = []ErrorCode{
	{ErrInvalid, codes.InvalidArgument},
	{ErrUnknownNode, codes.NotFound},
	{ErrNoOwner, codes.Unavailable},
	{ErrNotOwner, codes.Aborted},
	{ErrWrongNode, codes.FailedPrecondition},
	{ErrUnavailable, codes.Unavailable},
	{ErrNotServed, codes.Unimplemented},
	{context.Canceled, codes.Canceled},
	{context.DeadlineExceeded, codes.DeadlineExceeded},
	// The store's errors, for DataNode: a closing data instance first
	// (it wraps store.ErrUnavailable), so that errors.Is matches them on
	// the client and the data client retries unavailability.
	{dataservice.ErrClosed, codes.Unavailable},
	{store.ErrUnavailable, codes.Unavailable},
	{store.ErrNotFound, codes.NotFound},
	// The read-state service's errors, for ReadStateNode.
	{readstate.ErrForbidden, codes.PermissionDenied},
	{readstate.ErrClosed, codes.Unavailable},
	{readstate.ErrStore, codes.Unavailable},
	// The presence service's errors, for PresenceNode.
	{presence.ErrUnknownSession, codes.NotFound},
	{presence.ErrRateLimited, codes.ResourceExhausted},
	{presence.ErrInvalid, codes.InvalidArgument},
}

// errorDomain marks the ErrorInfo detail carrying the sentinel's text.
const errorDomain = "concord.transport"

// errorTable maps errors to and from gRPC statuses; it is the one place
// where that translation happens.
type errorTable []ErrorCode

func newErrorTable(domain []ErrorCode) errorTable {
	t := make(errorTable, 0, len(domain)+len(transportErrors))
	t = append(t, domain...)
	return append(t, transportErrors...)
}

// toStatus turns a handler's error into a gRPC status error. An error in
// the table travels with its code and the sentinel's text as ErrorInfo
// reason; others become codes.Unknown.
func (t errorTable) toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	for _, e := range t {
		if errors.Is(err, e.Err) {
			st := status.New(e.Code, err.Error())
			if d, derr := st.WithDetails(&errdetails.ErrorInfo{Reason: e.Err.Error(), Domain: errorDomain}); derr == nil {
				st = d
			}
			return st.Err()
		}
	}
	return status.Error(codes.Unknown, err.Error())
}

// fromStatus turns a status error from a call into an error matching the
// sentinel named in it, or, failing that, the transport error for its
// code; the status stays in the chain.
func (t errorTable) fromStatus(err error) error {
	st, ok := status.FromError(err)
	if !ok || err == nil {
		return err
	}
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok || info.Domain != errorDomain {
			continue
		}
		for _, e := range t {
			if e.Err.Error() == info.Reason {
				return &remoteError{sentinel: e.Err, st: st}
			}
		}
	}
	switch st.Code() {
	case codes.Unavailable:
		return &remoteError{sentinel: ErrUnavailable, st: st}
	case codes.Canceled:
		return &remoteError{sentinel: context.Canceled, st: st}
	case codes.DeadlineExceeded:
		return &remoteError{sentinel: context.DeadlineExceeded, st: st}
	case codes.InvalidArgument:
		return &remoteError{sentinel: ErrInvalid, st: st}
	case codes.Aborted:
		// Only ErrNotOwner travels as Aborted. A node of an earlier
		// release names it by an older text, which this keeps matching
		// during a rolling upgrade.
		return &remoteError{sentinel: ErrNotOwner, st: st}
	case codes.Unimplemented:
		return &remoteError{sentinel: ErrNotServed, st: st}
	}
	return err
}

// remoteError is an error that came back from another node.
type remoteError struct {
	sentinel error
	st       *status.Status
}

func (e *remoteError) Error() string {
	return fmt.Sprintf("remote: %s", e.st.Message())
}

// Is matches the sentinel the remote error was mapped from.
func (e *remoteError) Is(target error) bool { return target == e.sentinel }

// GRPCStatus returns the status the error arrived as.
func (e *remoteError) GRPCStatus() *status.Status { return e.st }

// retryable reports whether err means the node could not take the call,
// so that the ring's new owner may.
func retryable(err error) bool {
	return errors.Is(err, ErrUnavailable) || errors.Is(err, ErrNotOwner)
}
