//go:build integration

package kafka_test

import (
	"testing"

	"github.com/concord-chat/concord/runtime/adapters/eventlog/eventlogtest"
)

func TestPinned(t *testing.T) { eventlogtest.RunPinned(t, newLog) }
