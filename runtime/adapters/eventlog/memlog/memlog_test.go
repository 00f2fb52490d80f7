package memlog_test

import (
	"sync"
	"testing"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/adapters/eventlog/eventlogtest"
	"github.com/concord-chat/concord/runtime/adapters/eventlog/memlog"
)

// perTest returns a NewFunc that opens one Log per test, in a temporary
// directory, and hands the same Log to every call within that test (two
// Logs on one directory in one process would not see each other's appends).
func perTest() eventlogtest.NewFunc {
	var mu sync.Mutex
	logs := map[testing.TB]*memlog.Log{}
	return func(t testing.TB) eventlog.Log {
		mu.Lock()
		defer mu.Unlock()
		if l, ok := logs[t]; ok {
			return l
		}
		l, err := memlog.New(memlog.Config{Dir: t.TempDir()})
		if err != nil {
			t.Fatalf("memlog.New: %v", err)
		}
		logs[t] = l
		t.Cleanup(func() { l.Close() })
		return l
	}
}

func TestConformance(t *testing.T) {
	eventlogtest.Run(t, perTest())
}

func TestConformanceInMemory(t *testing.T) {
	var mu sync.Mutex
	logs := map[testing.TB]*memlog.Log{}
	eventlogtest.Run(t, func(t testing.TB) eventlog.Log {
		mu.Lock()
		defer mu.Unlock()
		if l, ok := logs[t]; ok {
			return l
		}
		l, err := memlog.New(memlog.Config{})
		if err != nil {
			t.Fatalf("memlog.New: %v", err)
		}
		logs[t] = l
		t.Cleanup(func() { l.Close() })
		return l
	})
}

func BenchmarkLog(b *testing.B) {
	eventlogtest.Bench(b, func(t testing.TB) eventlog.Log {
		l, err := memlog.New(memlog.Config{Dir: t.TempDir()})
		if err != nil {
			t.Fatalf("memlog.New: %v", err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	})
}
