package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/concord-chat/concord/internal/resttest"
)

// TestAckedWritesSurviveKill9 posts messages from several writers to a
// real `concord dev` process, kills it with SIGKILL while they are still
// writing, restarts it on the same data directory and checks that every
// message acknowledged with 200 is in history, along with the guild.
func TestAckedWritesSurviveKill9(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	p := startConcord(t, addr, "dev", "--http="+addr, "--data-dir="+dir, "--log-format=json")
	if p.token == "" {
		t.Fatalf("concord dev printed no dev token; output:\n%s", p.logs())
	}
	var me struct {
		ID       string `json:"id"`
		Username string `json:"username"`
	}
	resttest.Call(t, addr, p.token, "GET", "/users/@me", nil, &me)
	if me.Username != "dev" {
		t.Fatalf("dev token belongs to %q", me.Username)
	}
	var g struct {
		ID string `json:"id"`
	}
	resttest.Call(t, addr, p.token, "POST", "/guilds", map[string]string{"name": "durable"}, &g)
	var ch struct {
		ID string `json:"id"`
	}
	resttest.Call(t, addr, p.token, "POST", "/guilds/"+g.ID+"/channels", map[string]any{"name": "log", "type": 0}, &ch)

	var (
		mu    sync.Mutex
		acked []string
		wg    sync.WaitGroup
	)
	stop := make(chan struct{})
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				var m struct {
					ID string `json:"id"`
				}
				status, id := post(addr, p.token, ch.ID, fmt.Sprintf("w%d-%d", w, i), &m)
				if status != 200 {
					return // the process is gone: unacknowledged
				}
				mu.Lock()
				acked = append(acked, id)
				n := len(acked)
				mu.Unlock()
				if n == 60 {
					close(stop)
				}
			}
		}(w)
	}
	<-stop
	p.kill() // SIGKILL while the other writers are mid-request
	wg.Wait()

	p2 := startConcord(t, addr, "dev", "--http="+addr, "--data-dir="+dir)
	if p2.token == "" {
		t.Fatal("restarted concord printed no dev token")
	}
	seen := map[string]bool{}
	before := ""
	for {
		var page []struct {
			ID string `json:"id"`
		}
		q := "/channels/" + ch.ID + "/messages?limit=100"
		if before != "" {
			q += "&before=" + before
		}
		resttest.Call(t, addr, p2.token, "GET", q, nil, &page)
		for _, m := range page {
			seen[m.ID] = true
		}
		if len(page) < 100 {
			break
		}
		before = page[len(page)-1].ID
	}
	mu.Lock()
	defer mu.Unlock()
	for _, id := range acked {
		if !seen[id] {
			t.Errorf("acknowledged message %s missing after kill -9 and restart", id)
		}
	}
	if len(acked) < 60 {
		t.Fatalf("only %d acks before the kill", len(acked))
	}
	var g2 struct {
		Name string `json:"name"`
	}
	resttest.Call(t, addr, p2.token, "GET", "/guilds/"+g.ID, nil, &g2)
	if g2.Name != "durable" {
		t.Fatalf("guild after restart = %+v", g2)
	}
	if err := p2.stop(); err != nil {
		t.Fatalf("SIGTERM shutdown: %v\n%s", err, p2.logs())
	}
}

// post sends a message and returns the status and the id on 200; a
// transport error (the server died) counts as not acknowledged.
func post(addr, token, channel, content string, out *struct {
	ID string `json:"id"`
}) (int, string) {
	for {
		status, retryAfter, err := tryPost(addr, token, channel, content, out)
		if err != nil {
			return 0, ""
		}
		if status != http.StatusTooManyRequests {
			return status, out.ID
		}
		// Rate limited (5 messages per 5 s per channel): wait
		// as a client library does, then send again.
		<-time.After(retryAfter)
	}
}

// tryPost posts once and returns the status and, for a 429, how long to
// wait (Retry-After).
func tryPost(addr, token, channel, content string, out any) (int, time.Duration, error) {
	b, _ := json.Marshal(map[string]any{"content": content})
	req, _ := http.NewRequest("POST", "http://"+addr+"/api/v10/channels/"+channel+"/messages", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, 0, err
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		secs, err := strconv.ParseFloat(resp.Header.Get("Retry-After"), 64)
		if err != nil || secs <= 0 {
			secs = 1
		}
		return resp.StatusCode, time.Duration(secs * float64(time.Second)), nil
	}
	if resp.StatusCode == 200 {
		if err := json.Unmarshal(raw, out); err != nil {
			return 0, 0, err
		}
	}
	return resp.StatusCode, 0, nil
}
