package e2e

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/concord-chat/concord/internal/resttest"
	"github.com/concord-chat/concord/runtime/domain/live/livetest"
)

// TestAckedLiveCommentsSurviveKill9: every live comment `concord dev`
// answered 201 is in scroll-back and in the SSE snapshot after a kill -9
// and a restart on the same data directory, once, with its seq; posting
// goes on above the old seqs.
func TestAckedLiveCommentsSurviveKill9(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	base := "http://" + addr
	p := startConcord(t, addr, "dev", "--http="+addr, "--data-dir="+dir, "--log-format=json")
	if p.token == "" {
		t.Fatalf("concord dev printed no dev token; output:\n%s", p.logs())
	}
	var s struct {
		ID string `json:"id"`
	}
	if st := liveCall(t, base, p.token, "POST", "/v1/streams", map[string]any{"title": "durable"}, &s); st != 201 {
		t.Fatalf("create stream = %d", st)
	}
	type ack struct {
		ID  string `json:"id"`
		Seq int64  `json:"seq"`
	}
	var (
		mu    sync.Mutex
		acked []ack
		wg    sync.WaitGroup
	)
	stop := make(chan struct{})
	// The creator is exempt from the per-user interval: four writers post
	// as fast as the log acknowledges.
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				var c ack
				st, _, err := resttest.Do(context.Background(), nil, "POST", base+"/v1/streams/"+s.ID+"/comments", p.token,
					map[string]any{"text": fmt.Sprintf("w%d-%d", w, i), "video_ts_ms": i}, &c)
				if err != nil || st != 201 {
					return // the process is gone: not acknowledged
				}
				mu.Lock()
				acked = append(acked, c)
				n := len(acked)
				mu.Unlock()
				if n == 80 {
					close(stop)
				}
			}
		}()
	}
	<-stop
	p.kill() // SIGKILL while the other writers are mid-request
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(acked) < 80 {
		t.Fatalf("only %d acks before the kill", len(acked))
	}

	p2 := startConcord(t, addr, "dev", "--http="+addr, "--data-dir="+dir)
	bySeq := map[int64]string{}
	var maxSeq int64
	for _, a := range acked {
		if prev, dup := bySeq[a.Seq]; dup {
			t.Fatalf("seq %d acknowledged twice: %s and %s", a.Seq, prev, a.ID)
		}
		bySeq[a.Seq] = a.ID
		maxSeq = max(maxSeq, a.Seq)
	}
	// Scroll-back: the archiver resumes from its committed offset.
	deadline := time.Now().Add(30 * time.Second)
	for {
		seen := scrollBack(t, base, s.ID)
		missing := 0
		for seq, id := range bySeq {
			if seen[seq] != id {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d acknowledged comments missing from scroll-back after kill -9 and restart", missing, len(bySeq))
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The SSE snapshot: the newest 50, oldest first, every acknowledged one
	// among them.
	v := livetest.Watch(t, base, s.ID, nil, "")
	v.Next(15*time.Second, "state")
	snap := v.Comments(50, 15*time.Second)
	if snap[49].Seq < maxSeq {
		t.Fatalf("snapshot ends at seq %d, below the last acknowledged %d", snap[49].Seq, maxSeq)
	}
	in := map[int64]string{}
	for i, c := range snap {
		if i > 0 && c.Seq <= snap[i-1].Seq {
			t.Fatalf("snapshot out of order at %d: %d after %d", i, c.Seq, snap[i-1].Seq)
		}
		in[c.Seq] = c.ID
	}
	for seq, id := range bySeq {
		if seq >= snap[0].Seq && in[seq] != id {
			t.Fatalf("acknowledged comment seq %d (%s) missing from the snapshot after restart", seq, id)
		}
	}
	var c ack
	if st := liveCall(t, base, p2.token, "POST", "/v1/streams/"+s.ID+"/comments", map[string]any{"text": "after", "video_ts_ms": 1}, &c); st != 201 || c.Seq <= snap[49].Seq {
		t.Fatalf("post after restart = %d seq %d, want 201 above %d", st, c.Seq, snap[49].Seq)
	}
	if got := v.Comments(1, 15*time.Second); got[0].ID != c.ID {
		t.Fatalf("live after restart = %+v", got[0])
	}
	if err := p2.stop(); err != nil {
		t.Fatalf("SIGTERM shutdown: %v\n%s", err, p2.logs())
	}
}

// scrollBack pages through a stream's comments, newest first, and maps
// seq to id.
func scrollBack(t *testing.T, base, stream string) map[int64]string {
	t.Helper()
	seen := map[int64]string{}
	before := ""
	for {
		var page []struct {
			ID  string `json:"id"`
			Seq int64  `json:"seq"`
		}
		q := "/v1/streams/" + stream + "/comments?limit=100"
		if before != "" {
			q += "&before=" + before
		}
		if st := liveCall(t, base, "", "GET", q, nil, &page); st != 200 {
			t.Fatalf("scroll-back = %d", st)
		}
		for _, c := range page {
			seen[c.Seq] = c.ID
		}
		if len(page) < 100 {
			return seen
		}
		before = strconv.FormatInt(page[len(page)-1].Seq, 10)
	}
}

// liveCall sends a request to the live-comments API and decodes a 2xx
// answer into out.
func liveCall(t *testing.T, base, token, method, path string, body, out any) int {
	t.Helper()
	st, _, err := resttest.Do(context.Background(), nil, method, base+path, token, body, out)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return st
}
