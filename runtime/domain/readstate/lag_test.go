package readstate_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/domain/readstate"
)

// Each applied event is observed in concord_readstate_consumer_lag_seconds
// by how long ago the log accepted it; a record without a log time (a
// replay from a log that keeps none) is not.
func TestConsumerLag(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := newService(t, readstate.Config{Registerer: reg}, newStore(t, ""), &visibility{}, nil)
	r := msg(t, 1000, 0, channel, nil, nil, false)
	r.Time = time.Now().Add(-2 * time.Second)
	if err := s.Apply(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(context.Background(), msg(t, 1001, 1, channel, nil, nil, false)); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "concord_readstate_consumer_lag_seconds" {
			continue
		}
		h := mf.GetMetric()[0].GetHistogram()
		if h.GetSampleCount() != 1 || h.GetSampleSum() < 2 || h.GetSampleSum() > 60 {
			t.Fatalf("lag: %d observations summing %v s, want one of about 2 s", h.GetSampleCount(), h.GetSampleSum())
		}
		return
	}
	t.Fatal("no concord_readstate_consumer_lag_seconds")
}
