//go:build integration

package kafka_test

import (
	"context"
	"os"
	"testing"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/adapters/eventlog/eventlogtest"
	"github.com/concord-chat/concord/runtime/adapters/eventlog/kafka"
)

// brokers returns the broker `make test` started. It fails, never skips,
// when CONCORD_KAFKA is unset.
func brokers(t testing.TB) []string {
	addr := os.Getenv("CONCORD_KAFKA")
	if addr == "" {
		t.Fatal("CONCORD_KAFKA is not set: run `make test`, or start a broker with `hack/kafka/kafka.sh start` and set CONCORD_KAFKA=127.0.0.1:9092")
	}
	return []string{addr}
}

func newLog(t testing.TB) eventlog.Log {
	l, err := kafka.New(context.Background(), kafka.Config{Brokers: brokers(t)})
	if err != nil {
		t.Fatalf("kafka.New: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func TestConformance(t *testing.T) {
	eventlogtest.Run(t, newLog)
}

func BenchmarkLog(b *testing.B) {
	eventlogtest.Bench(b, newLog)
}
