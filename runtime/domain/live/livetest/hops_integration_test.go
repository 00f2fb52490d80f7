//go:build integration

package livetest_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/concord-chat/concord/runtime/adapters/counters"
	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live"
	"github.com/concord-chat/concord/runtime/domain/live/livetest"
)

// stages collects how long each backend call of the comment path took.
type stages struct {
	mu  sync.Mutex
	got map[string][]time.Duration
}

func (s *stages) add(name string, since time.Time) {
	d := time.Since(since)
	s.mu.Lock()
	s.got[name] = append(s.got[name], d)
	s.mu.Unlock()
}

func (s *stages) reset() {
	s.mu.Lock()
	s.got = map[string][]time.Duration{}
	s.mu.Unlock()
}

// mean is the mean of name's calls and how many there were.
func (s *stages) mean(name string) (time.Duration, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ds := s.got[name]
	if len(ds) == 0 {
		return 0, 0
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(len(ds)), len(ds)
}

type timedLog struct {
	livetest.Log
	st *stages
}

func (l timedLog) AppendTo(ctx context.Context, topic string, partition int32, recs ...eventlog.Record) ([]int64, error) {
	defer l.st.add("log-append", time.Now())
	return l.Log.AppendTo(ctx, topic, partition, recs...)
}

type timedCounters struct {
	live.Counters
	st *stages
}

func (c timedCounters) Take(ctx context.Context, key string, limit int, window time.Duration, now time.Time) (counters.Decision, error) {
	defer c.st.add("counter-take", time.Now())
	return c.Counters.Take(ctx, key, limit, window, now)
}

func (c timedCounters) Incr(ctx context.Context, key string, by int64, ttl time.Duration) (int64, error) {
	defer c.st.add("counter-incr", time.Now())
	return c.Counters.Incr(ctx, key, by, ttl)
}

type timedUsers struct {
	store.Users
	st *stages
}

func (u timedUsers) GetUser(ctx context.Context, id snowflake.ID) (store.User, error) {
	defer u.st.add("user-read", time.Now())
	return u.Users.GetUser(ctx, id)
}

// histSum is a histogram of reg's sum (seconds) and count.
func histSum(b *testing.B, reg *prometheus.Registry, name string) (float64, uint64) {
	b.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name || mf.GetType() != dto.MetricType_HISTOGRAM || len(mf.Metric) == 0 {
			continue
		}
		h := mf.Metric[0].GetHistogram()
		return h.GetSampleSum(), h.GetSampleCount()
	}
	b.Fatalf("no histogram %s", name)
	return 0, 0
}

var hopMetrics = []struct{ name, unit string }{
	{"concord_live_router_log_age_seconds", "accept-to-router-ms"},
	{"concord_live_router_accept_to_publish_seconds", "accept-to-publish-ms"},
	{"concord_live_gateway_relay_age_seconds", "accept-to-gateway-ms"},
	{"concord_live_gateway_post_to_flush_seconds", "accept-to-write-ms"},
}

// BenchmarkPostHops measures one comment's way through the real servers
// hop by hop: the POST (token, the author's account on Cassandra, the
// sync filter's two Redis counters, the append to Kafka with acks=all),
// Kafka to the router, the router's cache write and relay publish on
// Redis, the gateway's receipt and its write to one SSE viewer. Each
// comment follows an idle period (350 ms), so the gateway's 250 ms flush
// rule never holds it: what is left is the path itself. Eight viewers
// (not the creator, so the rate limit is checked) take turns posting.
//
//	source ~/.cache/concord/test-env.sh
//	go test -tags integration ./runtime/domain/live/livetest -run '^$' -bench BenchmarkPostHops -benchtime 60x
//
// HOPS_NOREPORT=1 sets the gateway's viewer-count interval to an hour.
func BenchmarkPostHops(b *testing.B) {
	bk := livetest.RealBackends(b)
	st := &stages{}
	st.reset()
	bk.Log = timedLog{Log: bk.Log, st: st}
	bk.Counters = timedCounters{Counters: bk.Counters, st: st}
	bk.Users = timedUsers{Users: bk.Users, st: st}
	reg := prometheus.NewRegistry()
	o := livetest.Options{Registerer: reg}
	if os.Getenv("HOPS_NOREPORT") != "" {
		// Viewer counts (and the pings riding with them) out of the way.
		o.Gateway.ReportInterval = time.Hour
	}
	e := livetest.Start(b, bk, o)
	alice := e.NewUser()
	s := e.CreateStream(alice, "hops")
	users := make([]livetest.User, 8)
	for i := range users {
		users[i] = e.NewUser()
	}
	v := livetest.Watch(b, e.URL, s.ID, nil, "")
	v.Next(30*time.Second, "state")
	post := func(u livetest.User, text string) (answered, screen time.Duration) {
		t0 := time.Now()
		e.Post(u, s.ID, text, 0)
		answered = time.Since(t0)
		for {
			ev := v.Next(30*time.Second, "comment")
			if strings.Contains(string(ev.Data), `"text":"`+text+`"`) {
				return answered, time.Since(t0)
			}
		}
	}
	// Warm every connection and the partition's producer first.
	for i, u := range users {
		post(u, fmt.Sprintf("warm-%d", i))
	}
	time.Sleep(2100 * time.Millisecond) // the warm-up's rate-limit slots
	st.reset()
	type sum struct {
		s float64
		n uint64
	}
	base := map[string]sum{}
	for _, h := range hopMetrics {
		s, n := histSum(b, reg, h.name)
		base[h.name] = sum{s, n}
	}
	var answered, screen []time.Duration
	for i := 0; b.Loop(); i++ {
		a, sc := post(users[i%len(users)], fmt.Sprintf("hop-%d", i))
		answered, screen = append(answered, a), append(screen, sc)
		time.Sleep(350 * time.Millisecond)
	}
	b.StopTimer()
	ap50, ap99 := percentiles(answered)
	sp50, sp99 := percentiles(screen)
	b.ReportMetric(ms(ap50), "post-p50-ms")
	b.ReportMetric(ms(ap99), "post-p99-ms")
	b.ReportMetric(ms(sp50), "screen-p50-ms")
	b.ReportMetric(ms(sp99), "screen-p99-ms")
	for _, name := range []string{"user-read", "counter-take", "counter-incr", "log-append"} {
		m, n := st.mean(name)
		b.ReportMetric(ms(m)*float64(n)/float64(len(screen)), name+"-ms/op")
		if n > 0 {
			st.mu.Lock()
			p50, p99 := percentiles(st.got[name])
			st.mu.Unlock()
			b.Logf("%s: %d calls, mean %v, p50 %v, p99 %v", name, n, m, p50, p99)
		}
	}
	for _, h := range hopMetrics {
		s, n := histSum(b, reg, h.name)
		s, n = s-base[h.name].s, n-base[h.name].n
		if n > 0 {
			b.ReportMetric(s/float64(n)*1000, h.unit)
		}
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
