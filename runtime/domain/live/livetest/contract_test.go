package livetest_test

import (
	"testing"

	"github.com/concord-chat/concord/runtime/domain/live/livetest"
)

// TestContract runs the HTTP contract on the in-process backends of
// `concord dev`: memlog, the in-process recent cache, relay and board,
// and the Pebble comments store.
func TestContract(t *testing.T) {
	livetest.Contract(t, func(t *testing.T, o livetest.Options) *livetest.Env {
		return livetest.Start(t, livetest.Backends{}, o)
	})
}
