package recent_test

import (
	"testing"

	"github.com/concord-chat/concord/runtime/domain/live/recent"
	"github.com/concord-chat/concord/runtime/domain/live/recent/recenttest"
)

func TestConformance(t *testing.T) { recenttest.Run(t, recent.New()) }
