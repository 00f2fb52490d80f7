package backend_test

import (
	"context"
	"errors"
	"testing"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/adapters/eventlog/backend"
	"github.com/concord-chat/concord/runtime/adapters/eventlog/memlog"
)

func TestOpen(t *testing.T) {
	l, err := backend.Open(context.Background(), "", t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, ok := l.(*memlog.Log); !ok {
		t.Fatalf("default log is %T, want *memlog.Log", l)
	}
	if _, err := backend.Open(context.Background(), "redis://x:1", "", nil); !errors.Is(err, eventlog.ErrInvalid) {
		t.Fatalf("Open(redis://) = %v, want ErrInvalid", err)
	}
}
