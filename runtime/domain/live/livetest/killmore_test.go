package livetest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/domain/live/classifier/kserve"
	"github.com/concord-chat/concord/runtime/domain/live/classifier/linear"
	"github.com/concord-chat/concord/runtime/domain/live/livetest"
	"github.com/concord-chat/concord/runtime/domain/live/moderation"
	"github.com/concord-chat/concord/runtime/domain/live/router"
	"github.com/concord-chat/concord/runtime/domain/live/sse"
)

// screen is what one viewer saw, with the time each thing arrived.
type screen struct {
	mu        sync.Mutex
	comments  []time.Time
	seqs      []int64
	reactions []time.Time
	counted   int64 // sum of every reactions event's counts
	retracted map[string]time.Time
}

func (s *screen) follow(v *sse.Stream) {
	for {
		ev, err := v.Next()
		if err != nil {
			return
		}
		now := time.Now()
		s.mu.Lock()
		switch ev.Type {
		case "comment":
			var c livetest.Comment
			json.Unmarshal(ev.Data, &c)
			s.comments, s.seqs = append(s.comments, now), append(s.seqs, c.Seq)
		case "reactions":
			var rx struct {
				Counts map[string]int64 `json:"counts"`
			}
			json.Unmarshal(ev.Data, &rx)
			for _, n := range rx.Counts {
				s.counted += n
			}
			s.reactions = append(s.reactions, now)
		case "retract":
			var rt struct {
				CommentID string `json:"comment_id"`
			}
			json.Unmarshal(ev.Data, &rt)
			s.retracted[rt.CommentID] = now
		}
		s.mu.Unlock()
	}
}

// gapAfter is the longest wait between two arrivals in at after t0.
func gapAfter(at []time.Time, t0 time.Time) time.Duration {
	var worst time.Duration
	for i := 1; i < len(at); i++ {
		if at[i].After(t0) {
			worst = max(worst, at[i].Sub(at[i-1]))
		}
	}
	return worst
}

// Kill the reactions aggregator and the classifier under load (a
// comment every 50 ms, a reaction tap every 50 ms from ten viewers) and
// measure what a viewer sees.
//
// Aggregator: one of the two routers of the group stops (its reactions
// partitions move to the other). The viewer's reactions events pause
// for at most a few seconds and resume; the comments never pause beyond
// the comment router's own hand-over; every tap accepted is counted
// once (the member leaves cleanly, so its partitions resume from their
// committed offsets).
//
// Classifier: the KServe server the moderation consumer calls goes
// away. Comments keep reaching the viewer (moderation is off the
// comment path); an offensive comment posted during the outage stays
// on screen until the server is back, then is retracted with the
// classifier's reason.
func TestKillAggregatorAndClassifier(t *testing.T) {
	e := livetest.Start(t, livetest.Backends{}, livetest.Options{NoRouter: true})
	var kills []context.CancelFunc
	for range 2 {
		ctx, kill := context.WithCancel(context.Background())
		t.Cleanup(kill)
		cfg := livetest.RouterConfig(e.B.Topics)
		cfg.Registerer = prometheus.NewRegistry()
		r, err := router.New(cfg, router.Deps{Log: e.B.Log, Recent: e.B.Cache, Relay: e.B.Relay, Board: e.B.Board})
		if err != nil {
			t.Fatal(err)
		}
		go r.Run(ctx)
		kills = append(kills, kill)
	}

	// The classifier: the Go model behind a KServe v2 server.
	model, err := linear.Default()
	if err != nil {
		t.Fatal(err)
	}
	ks := &kserve.Server{Model: "toxic", Classifier: model}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	srv := &http.Server{Handler: ks.Handler()}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	client, err := kserve.New(kserve.Config{URL: "http://" + addr, Model: "toxic", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	mod, err := moderation.New(moderation.Config{Topics: e.B.Topics, Group: e.B.Topics.Comments + ".moderation", BanAfter: -1,
		Logger: slog.New(slog.DiscardHandler)}, moderation.Deps{Log: e.B.Log, Append: e.B.Log, Classifier: client, Board: e.B.Board})
	if err != nil {
		t.Fatal(err)
	}
	mctx, mcancel := context.WithCancel(context.Background())
	t.Cleanup(mcancel)
	go mod.Run(mctx)

	alice := e.NewUser()
	s := e.CreateStream(alice, "under load")
	v, err := sse.Dial(context.Background(), nil, e.URL+"/v1/streams/"+s.ID+"/live", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	scr := &screen{retracted: map[string]time.Time{}}
	go scr.follow(v)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var taps atomic.Int64
	wg.Add(2)
	go func() { // comments
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			e.Post(alice, s.ID, fmt.Sprintf("steady %d", i), 0)
		}
	}()
	tappers := make([]livetest.User, 10)
	for i := range tappers {
		tappers[i] = e.NewUser()
	}
	go func() { // reactions
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			u := tappers[i%len(tappers)]
			r := e.Do("POST", "/v1/streams/"+s.ID+"/reactions", u.Token, map[string]any{"batch_id": fmt.Sprintf("b%d", i), "counts": map[string]int{"heart": 1}})
			if r.Status == 202 {
				taps.Add(1)
			}
		}
	}()
	reactionsAfter := func(t0 time.Time) {
		t.Helper()
		e.Eventually(30*time.Second, func() string {
			scr.mu.Lock()
			defer scr.mu.Unlock()
			n := 0
			for _, at := range scr.reactions {
				if at.After(t0) {
					n++
				}
			}
			if n < 3 {
				return "fewer than 3 reactions events since " + t0.Format(time.StampMilli)
			}
			return ""
		})
	}
	start := time.Now()
	reactionsAfter(start)

	// The aggregator: one router of the two goes.
	t0 := time.Now()
	kills[0]()
	time.Sleep(8 * time.Second) // the load goes on across the rebalance
	reactionsAfter(time.Now())
	scr.mu.Lock()
	rxGap, cmGap := gapAfter(scr.reactions, t0), gapAfter(scr.comments, t0)
	scr.mu.Unlock()
	t.Logf("aggregator (one router of two) killed: longest pause between reactions events %s, between comments %s",
		rxGap.Round(time.Millisecond), cmGap.Round(time.Millisecond))

	// The classifier goes away.
	t1 := time.Now()
	srv.Close()
	bad := e.Post(e.NewUser(), s.ID, "shut up you stupid moron", 0)
	time.Sleep(3 * time.Second) // the outage lasts; comments keep flowing
	scr.mu.Lock()
	_, early := scr.retracted[bad.ID]
	cmGap = gapAfter(scr.comments, t1)
	scr.mu.Unlock()
	if early {
		t.Fatal("retracted while the classifier was down")
	}
	t.Logf("classifier down 3 s: longest pause between comments %s; the offensive comment stays on screen", cmGap.Round(time.Millisecond))
	l2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("the classifier cannot come back on %s: %v", addr, err)
	}
	srv2 := &http.Server{Handler: ks.Handler()}
	go srv2.Serve(l2)
	t.Cleanup(func() { srv2.Close() })
	back := time.Now()
	e.Eventually(30*time.Second, func() string {
		scr.mu.Lock()
		defer scr.mu.Unlock()
		if _, ok := scr.retracted[bad.ID]; !ok {
			return "the offensive comment is not retracted yet"
		}
		return ""
	})
	scr.mu.Lock()
	took, onScreen := scr.retracted[bad.ID].Sub(back), scr.retracted[bad.ID].Sub(t1)
	scr.mu.Unlock()
	t.Logf("classifier back: the offensive comment retracted %s later (%s after it was posted)", took.Round(time.Millisecond),
		onScreen.Round(time.Millisecond))

	close(stop)
	wg.Wait()
	// Every second's reactions reach the viewer (about 1.5 s after the
	// second ends): the router stopped cleanly, handing its partitions
	// over from their committed offsets, so nothing is lost or counted
	// twice.
	accepted := taps.Load()
	e.Eventually(30*time.Second, func() string {
		scr.mu.Lock()
		defer scr.mu.Unlock()
		if scr.counted != accepted {
			return fmt.Sprintf("%d reactions counted for %d taps accepted", scr.counted, accepted)
		}
		return ""
	})
	scr.mu.Lock()
	defer scr.mu.Unlock()
	for i := 1; i < len(scr.seqs); i++ {
		if scr.seqs[i] <= scr.seqs[i-1] {
			t.Fatalf("comment seq %d after %d", scr.seqs[i], scr.seqs[i-1])
		}
	}
	t.Logf("reactions: %d taps accepted, %d counted (%.3f)", accepted, scr.counted, float64(scr.counted)/float64(accepted))
}
