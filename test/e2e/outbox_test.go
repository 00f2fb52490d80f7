package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/concord-chat/concord/internal/gwtest"
	"github.com/concord-chat/concord/internal/resttest"
)

// TestMentionCountSurvivesKill9 kills a real `concord dev` with SIGKILL
// while several writers send messages that mention bob, restarts it on
// the same data directory and requires bob's mention count in the
// channel to equal the number of those messages in history — acknowledged
// or not. A message whose store write landed while its event was lost
// (the process died between the write and a separate enqueue) is in
// history but never counted; with the event committed in the message's
// own write, the two cannot disagree.
func TestMentionCountSurvivesKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts a real concord dev process; not part of -short")
	}
	dir := t.TempDir()
	addr := freeAddr(t)
	p := startConcord(t, addr, "dev", "--http="+addr, "--data-dir="+dir, "--log-format=json")
	if p.token == "" {
		t.Fatalf("concord dev printed no dev token; output:\n%s", p.logs())
	}
	var bob struct {
		Token  string `json:"token"`
		UserID string `json:"user_id"`
	}
	resttest.Call(t, addr, "", "POST", "/auth/register", map[string]any{"username": "bob", "password": "correct-horse-1"}, &bob)
	var g struct {
		ID string `json:"id"`
	}
	resttest.Call(t, addr, p.token, "POST", "/guilds", map[string]string{"name": "mentions"}, &g)
	var ch struct {
		ID string `json:"id"`
	}
	resttest.Call(t, addr, p.token, "POST", "/guilds/"+g.ID+"/channels", map[string]any{"name": "pings", "type": 0}, &ch)
	var inv struct {
		Code string `json:"code"`
	}
	resttest.Call(t, addr, p.token, "POST", "/channels/"+ch.ID+"/invites", map[string]any{}, &inv)
	resttest.Call(t, addr, bob.Token, "POST", "/invites/"+inv.Code, map[string]any{}, nil)

	var (
		mu    sync.Mutex
		acked int
		wg    sync.WaitGroup
	)
	stop := make(chan struct{})
	var once sync.Once
	for w := range 3 {
		wg.Add(1)
		go func() {
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
				status, _ := post(addr, p.token, ch.ID, fmt.Sprintf("<@%s> w%d-%d", bob.UserID, w, i), &m)
				if status != 200 {
					return // the process is gone
				}
				mu.Lock()
				acked++
				n := acked
				mu.Unlock()
				if n == 12 {
					once.Do(func() { close(stop) })
				}
			}
		}()
	}
	<-stop
	p.kill() // SIGKILL while the other writers are mid-request
	wg.Wait()

	p2 := startConcord(t, addr, "dev", "--http="+addr, "--data-dir="+dir)
	var history []struct {
		ID      string `json:"id"`
		Content string `json:"content"`
	}
	resttest.Call(t, addr, p2.token, "GET", "/channels/"+ch.ID+"/messages?limit=100", nil, &history)
	want := 0
	for _, m := range history {
		if strings.Contains(m.Content, "<@"+bob.UserID+">") {
			want++
		}
	}
	mu.Lock()
	if want < acked {
		t.Fatalf("history holds %d mentioning messages, fewer than the %d acknowledged", want, acked)
	}
	mu.Unlock()

	// READY's read state is the state to await (there is no event for a
	// count reaching a value): a new session each time, until the count
	// reaches want; then it must be exactly want.
	deadline := time.Now().Add(90 * time.Second)
	for {
		got := readyMentions(t, addr, bob.Token, ch.ID)
		if got >= want {
			if got != want {
				t.Fatalf("bob's mention count = %d, want %d (one per mentioning message in history)", got, want)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bob's mention count = %d after 90s, want %d: events of stored messages were lost\n%s", got, want, p2.logs())
		}
		<-time.After(200 * time.Millisecond)
	}
	if err := p2.stop(); err != nil {
		t.Fatalf("SIGTERM shutdown: %v\n%s", err, p2.logs())
	}
}

// readyMentions identifies as token and returns READY's mention count of
// channel.
func readyMentions(t *testing.T, addr, token, channel string) int {
	t.Helper()
	c, err := gwtest.Dial(gwtest.URL(addr), token, gwtest.Options{Name: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Await("READY", 30*time.Second, gwtest.HasType("READY")); err != nil {
		t.Fatal(err)
	}
	for _, f := range c.Frames() {
		if f.Type != "READY" {
			continue
		}
		var d struct {
			ReadState struct {
				Entries []struct {
					ID           string `json:"id"`
					MentionCount int    `json:"mention_count"`
				} `json:"entries"`
			} `json:"read_state"`
		}
		if err := json.Unmarshal(f.D, &d); err != nil {
			t.Fatalf("READY: %v", err)
		}
		for _, e := range d.ReadState.Entries {
			if e.ID == channel {
				return e.MentionCount
			}
		}
		return 0
	}
	t.Fatal("no READY frame")
	return 0
}
