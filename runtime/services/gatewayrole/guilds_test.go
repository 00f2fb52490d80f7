package gatewayrole

import (
	"errors"
	"fmt"
	"testing"

	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/edge/gateway"
)

// TestIdentifyErrorPicksTheCloseCode checks that each identify error of
// the guild tier reaches the gateway as the sentinel its close code is
// chosen by, still wrapping the guild's error, and that other errors
// pass unchanged.
func TestIdentifyErrorPicksTheCloseCode(t *testing.T) {
	for _, c := range []struct{ from, to error }{
		{guild.ErrAuthenticationFailed, gateway.ErrAuthenticationFailed},
		{guild.ErrInvalidIntents, gateway.ErrInvalidIntents},
		{guild.ErrInvalidShard, gateway.ErrInvalidShard},
	} {
		err := identifyError(fmt.Errorf("identify: %w", c.from))
		if !errors.Is(err, c.to) || !errors.Is(err, c.from) {
			t.Errorf("%v became %v, want it to wrap %v", c.from, err, c.to)
		}
	}
	if identifyError(nil) != nil {
		t.Error("nil became an error")
	}
	other := fmt.Errorf("identify: %w", guild.ErrUnavailable)
	if err := identifyError(other); err != other {
		t.Errorf("unavailable became %v", err)
	}
}
