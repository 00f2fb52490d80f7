package relay_test

import (
	"testing"

	"github.com/concord-chat/concord/runtime/domain/live/relay"
	"github.com/concord-chat/concord/runtime/domain/live/relay/relaytest"
)

func TestConformance(t *testing.T) {
	r := relay.New()
	relaytest.Run(t, r, r)
}
