package typing

import (
	"fmt"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
)

// BenchmarkTyping5000Viewers: a channel with 5,000 sessions looking at it
// and 50 people typing, each every second: most requests are throttled or
// sampled out, the rest go to 5,000 sessions.
func BenchmarkTyping5000Viewers(b *testing.B) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tr, err := New(Config{Now: func() time.Time { return now }})
	if err != nil {
		b.Fatal(err)
	}
	for i := range 5000 {
		tr.Focus(event.Session{ID: event.SessionID(fmt.Sprint("v", i)), UserID: snowflake.ID(10000 + i), Node: "g"}, 1, 10)
	}
	delivered, targets := 0, 0
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%50 == 0 {
			now = now.Add(time.Second)
		}
		o, got := tr.Typing(snowflake.ID(1+i%50), 10)
		if o == Delivered {
			delivered++
			targets += len(got)
		}
	}
	b.ReportMetric(float64(delivered)/float64(b.N), "delivered/op")
	b.ReportMetric(float64(targets)/float64(b.N), "deliveries/op")
	b.ReportMetric(5000, "naive-deliveries/op")
}
