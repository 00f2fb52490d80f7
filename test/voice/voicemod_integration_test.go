//go:build integration

package voice

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sumMetric adds the values of the /metrics samples on a node's admin
// listener named name whose labels contain every one of labels.
func sumMetric(t *testing.T, addr, name string, labels ...string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics on %s: %v", addr, err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var sum float64
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(line, l)
		}
		if !ok {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		sum += v
	}
	return sum
}

// awaitMetric polls a node's metric until it reaches want (metrics have
// no event to await); it returns the value reached.
func awaitMetric(t *testing.T, n *voiceNode, what string, want float64, name string, labels ...string) float64 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		v := sumMetric(t, n.admin, name, labels...)
		if v >= want {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s on %s: %s = %v, want ≥ %v\n%s", what, n.name, name, v, want, n.logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestServerMuteSplit: on a split topology (the guild node in the test
// process, the SFUs each `concord serve --roles=voice` in its own
// process, two discord.js bots in one call), the guild owner server-mutes
// the speaker with PATCH /guilds/{id}/members/{user} {"mute": true}: the
// guild's fleet posts a signed command to the SFU's process, which drops
// every packet of the muted speaker (concord_voice_packets_dropped_total
// {reason="server_muted"}) and forwards none of them to the listener; an
// unmute brings the audio back to the listener. Disconnecting the speaker
// (channel_id null) reaches the SFU as a command too.
func TestServerMuteSplit(t *testing.T) {
	c := startTwoSFUCall(t, 20, 20000)
	host := c.host(t, "")
	const (
		fwd     = "concord_voice_packets_forwarded_total"
		dropped = "concord_voice_packets_dropped_total"
		cmds    = "concord_voice_control_commands_total"
	)
	muted := `reason="server_muted"`
	awaitMetric(t, host, "the speaker's audio forwarded", 50, fwd)
	if d := sumMetric(t, host.admin, dropped, muted); d != 0 {
		t.Fatalf("%v packets dropped as server-muted before any mute", d)
	}

	c.chat.do(c.owner, "PATCH", "/guilds/"+c.guild+"/members/"+c.speakerID, map[string]any{"mute": true}, nil)
	d0 := awaitMetric(t, host, "the speaker's packets dropped as server-muted", 1, dropped, muted)
	if a := sumMetric(t, host.admin, cmds, `result="applied"`); a < 1 {
		t.Fatalf("the mute took effect without an applied command (%s = %v)", cmds, a)
	}
	f1 := sumMetric(t, host.admin, fwd)
	// A second of the speaker's packets (50) arrives and is dropped.
	awaitMetric(t, host, "a second of the muted speaker's packets dropped", d0+50, dropped, muted)
	f2 := sumMetric(t, host.admin, fwd)
	// A packet being forwarded as the first drop was counted may still
	// add itself; a leak would be dozens.
	if f2-f1 > 2 {
		t.Fatalf("%v packets forwarded while the only speaker was server-muted (dropped %v)", f2-f1, sumMetric(t, host.admin, dropped, muted)-d0)
	}
	t.Logf("muted: %v packets dropped, %v forwarded meanwhile", sumMetric(t, host.admin, dropped, muted)-d0+1, f2-f1)

	unmuted := time.Now()
	c.chat.do(c.owner, "PATCH", "/guilds/"+c.guild+"/members/"+c.speakerID, map[string]any{"mute": false}, nil)
	awaitMetric(t, host, "the unmuted speaker's audio forwarded again", f2+50, fwd)

	// The listener heard the speaker before the mute and again after the
	// unmute.
	cmdsBefore := sumMetric(t, host.admin, cmds)
	c.chat.do(c.owner, "PATCH", "/guilds/"+c.guild+"/members/"+c.speakerID, map[string]any{"channel_id": nil}, nil)
	awaitMetric(t, host, "the disconnect command", cmdsBefore+1, cmds)
	r, before, after, _, _ := c.heard(t, unmuted)
	if before < 50 || after < 50 {
		t.Fatalf("listener heard %d packets before the unmute and %d after, want ≥ 50 each (states %v, error %s)\n%s", before, after, r.States, r.Error, c.listener.Logs)
	}
}
