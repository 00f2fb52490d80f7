//go:build integration

package voice

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/app"
	"github.com/concord-chat/concord/runtime/config"
	"github.com/concord-chat/concord/runtime/edge/adminauth"
)

// drainState is the SFU's answer on /admin/drain (the operator's
// fleet.DrainState).
type drainState struct {
	Draining     bool  `json:"draining"`
	Sessions     int64 `json:"sessions"`
	Participants int64 `json:"participants"`
	Done         bool  `json:"done"`
}

// adminCall is one request to a node's /admin/ endpoints.
func adminCall(t *testing.T, method, addr, path, token string) (int, drainState) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	adminauth.Set(req, token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var st drainState
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
	}
	return resp.StatusCode, st
}

// TestDrainSFU: the SFU hosting a call of two discord.js bots (real
// processes, as TestFailoverKillSFU) is drained on its admin listener
// (--admin, as VoiceRegion pods run it), as the operator's scale-down
// does: refused without the cluster's admin token; with it the server
// reports draining, the guild moves the call to the other SFU of the
// region (a new VOICE_SERVER_UPDATE to both sessions), the listener hears
// the tone from the new server, and the drained server ends with no
// call, reporting done. The time from the drain to audio back is logged
// (docs/benchmarks.md).
func TestDrainSFU(t *testing.T) {
	c := startTwoSFUCall(t, 20, 20000)
	host := c.host(t, "")
	key, err := app.ServerKey(config.Config{ServerKey: failoverServerKey, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	token := adminauth.Derive(key)
	for _, tok := range []string{"", "not-the-admin-token"} {
		if code, _ := adminCall(t, "POST", host.admin, "/admin/drain", tok); code != http.StatusUnauthorized {
			t.Fatalf("POST /admin/drain with token %q: %d, want 401", tok, code)
		}
	}
	time.Sleep(2 * time.Second) // let audio flow on the first SFU before the drain
	if code, st := adminCall(t, "GET", host.admin, "/admin/drain", token); code != http.StatusOK || st.Draining || st.Sessions != 1 {
		t.Fatalf("GET /admin/drain before the drain: %d %+v, want not draining, 1 call (the unauthenticated drains did nothing)", code, st)
	}
	drained := time.Now()
	code, st := adminCall(t, "POST", host.admin, "/admin/drain", token)
	if code != http.StatusOK || !st.Draining {
		t.Fatalf("POST /admin/drain: %d %+v, want 200 draining", code, st)
	}
	t.Logf("drained %s (the call's SFU)", host.name)

	// The call moves: the other SFU reports both participants.
	moved := c.host(t, host.name)
	// The drained server empties and says it is done, in its state and
	// its load report (polled: neither has an event to await).
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, st = adminCall(t, "GET", host.admin, "/admin/drain", token)
		l := c.loads(t)[host.name]
		if st.Done && st.Sessions == 0 && l.Draining && l.Calls == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("drained SFU %s not empty: state %+v, load %+v\n%s", host.name, st, l, host.logs)
		}
		time.Sleep(200 * time.Millisecond)
	}
	emptied := time.Since(drained)

	r, before, after, _, _ := c.heard(t, drained)
	// The listener's connection to the new server: its connecting state
	// (the old connection closed) and then ready after the drain; audio
	// is back at the first packet after that.
	var left, ready time.Time
	for i, s := range r.States {
		if i >= len(r.StateTimes) || time.UnixMilli(r.StateTimes[i]).Before(drained) {
			continue
		}
		at := time.UnixMilli(r.StateTimes[i])
		if left.IsZero() && strings.HasSuffix(s, "->connecting") {
			left = at
		}
		if !left.IsZero() && strings.HasSuffix(s, "->ready") {
			ready = at
			break
		}
	}
	if ready.IsZero() {
		t.Fatalf("the listener never reconnected after the drain: states %v at %v", r.States, r.StateTimes)
	}
	var lastOld, back time.Time
	for _, ms := range r.Times {
		at := time.UnixMilli(ms)
		if !at.After(left) {
			lastOld = at
		} else if !at.Before(ready) && back.IsZero() {
			back = at
		}
	}
	t.Logf("call moved %s → %s; listener heard %d packets before the drain and %d after; it left the old server %v after the drain, was ready on the new one at %v, heard audio again at %v (the last packet from the old server at %v: %v without audio); drained server empty at %v",
		host.name, moved.name, before, after, left.Sub(drained), ready.Sub(drained), back.Sub(drained), lastOld.Sub(drained), back.Sub(lastOld), emptied)
	if before < 50 {
		t.Fatalf("only %d packets before the drain: the call never carried audio (states %v)", before, r.States)
	}
	if back.IsZero() || after < 100 {
		t.Fatalf("%d packets after the drain, none after the new connection was ready: the call did not move (states %v, error %s)\nlistener logs: %s", after, r.States, r.Error, c.listener.Logs)
	}
	if gap := back.Sub(drained); gap > 10*time.Second {
		t.Fatalf("audio back %v after the drain, want under 10 s", gap)
	}
}
