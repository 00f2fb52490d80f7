package recent_test

import (
	"testing"

	"github.com/concord-chat/concord/runtime/live/recent"
	"github.com/concord-chat/concord/runtime/live/recent/recenttest"
)

func TestConformance(t *testing.T) { recenttest.Run(t, recent.New()) }
