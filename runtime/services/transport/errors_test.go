package transport

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrNotOwner crosses the wire for every kind of key it is returned for,
// and a not-owner status whose reason a node of an earlier release wrote
// (a text this release does not know) still matches it by its code.
func TestNotOwnerCrossesTheWire(t *testing.T) {
	table := newErrorTable(nil)
	for _, key := range []string{"guild 7", "read states of user 9", "presence of user 9"} {
		err := table.fromStatus(table.toStatus(fmt.Errorf("%w: %s", ErrNotOwner, key)))
		if !errors.Is(err, ErrNotOwner) || !retryable(err) {
			t.Errorf("not owner of %s = %v, want ErrNotOwner, retryable", key, err)
		}
		if st, _ := status.FromError(err); st.Code() != codes.Aborted {
			t.Errorf("not owner of %s travelled as %v, want Aborted", key, st.Code())
		}
	}
	old, err := status.New(codes.Aborted, "guild 7").WithDetails(&errdetails.ErrorInfo{
		Reason: "transport: guild not owned by this node", Domain: errorDomain})
	if err != nil {
		t.Fatal(err)
	}
	if err := table.fromStatus(old.Err()); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("not-owner status of an earlier release = %v, want ErrNotOwner", err)
	}
}
