//go:build integration

package live

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live/livetest"
	"github.com/concord-chat/concord/runtime/domain/live/moderation"
	"github.com/concord-chat/concord/runtime/domain/live/relay/tree"
)

// TestRelayTreeAndModerationOnSplitRoles runs the live roles split on
// Kafka, Redis, Cassandra and etcd with the relay tier and the ML
// moderation consumer in processes of their own: two live-relay nodes
// (--live-relay=tree on the router and the gateway), one
// live-moderation (the Go model). A comment reaches a viewer through the
// relays (their copies count it); an offensive one is retracted with the
// classifier's reason; SIGKILL of the relay owning the stream: the
// comments posted after the kill reach the viewer through the sibling,
// each once and in seq order, and the time from the kill to the first of
// them on screen is logged.
func TestRelayTreeAndModerationOnSplitRoles(t *testing.T) {
	d := setup(t)
	relayAddrs := []string{freeAddr(t), freeAddr(t)}
	var relays []*proc
	for i, a := range relayAddrs {
		relays = append(relays, d.start(t, fmt.Sprintf("relay-%d", i), "--roles=live-relay", "--live-relay-listen="+a))
	}
	chat := d.start(t, "chat", "--roles=gateway,api,guild,live-api")
	gw := d.start(t, "gw", "--roles=live-gateway", "--live-relay=tree")
	d.start(t, "router", "--roles=live-router", "--live-relay=tree")
	d.start(t, "archiver", "--roles=live-archiver")
	d.start(t, "moderation", "--roles=live-moderation", "--live-classifier=linear")
	register := livetest.Register(chat.url)
	waitLive(t, chat.url, register(t))
	e := livetest.Remote(t, chat.url, livetest.RemoteRoles{NewUser: register, Viewers: livetest.MetricViewers(gw.url)})

	alice, fan, troll := e.NewUser(), e.NewUser(), e.NewUser()
	s := e.CreateStream(alice, "wired")
	v := livetest.Watch(t, chat.url, s.ID, nil, "")
	v.Next(livetest.Wait, "state")
	copies := func() float64 {
		n := 0.0
		for _, r := range relays {
			n += livetest.Metric(t, r.url, "concord_live_relay_copies_total")
		}
		return n
	}
	before := copies()
	c := e.Post(fan, s.ID, "what a great stream, thanks!", 0)
	if got := v.Comments(1, livetest.Wait); got[0].ID != c.ID {
		t.Fatalf("viewer got %+v, want %s", got[0], c.ID)
	}
	if after := copies(); after <= before {
		t.Fatalf("relay copies %v -> %v: the comment did not travel through the relays", before, after)
	}

	bad := e.Post(troll, s.ID, "shut up you stupid moron", 1)
	if got := v.Comments(1, livetest.Wait); got[0].ID != bad.ID {
		t.Fatalf("viewer got %+v, want %s", got[0], bad.ID)
	}
	ev := v.Next(livetest.Wait, "retract")
	var rt struct {
		CommentID string `json:"comment_id"`
		Reason    string `json:"reason"`
	}
	json.Unmarshal(ev.Data, &rt)
	if rt.CommentID != bad.ID || rt.Reason != moderation.Reason {
		t.Fatalf("retract %s, want %s by the classifier", ev.Data, bad.ID)
	}

	// Kill the stream's owner among the relays.
	id, _ := snowflake.Parse(s.ID)
	urls := []string{"http://" + relayAddrs[0], "http://" + relayAddrs[1]}
	owner := tree.Owner(id, urls, nil)
	victim := relays[0]
	if owner == urls[1] {
		victim = relays[1]
	}
	victim.kill()
	killed := time.Now()
	var posted []livetest.Comment
	posters := []livetest.User{e.NewUser(), e.NewUser(), e.NewUser()}
	for i, u := range posters {
		posted = append(posted, e.Post(u, s.ID, "after the relay died "+strconv.Itoa(i), int64(10+i)))
	}
	got := v.Comments(1, 30*time.Second)
	back := time.Since(killed)
	got = append(got, v.Comments(len(posted)-1, 30*time.Second)...)
	for i := range posted {
		if got[i].ID != posted[i].ID {
			t.Fatalf("after the relay kill the viewer got %v, want %v in order", ids(got), ids(posted))
		}
	}
	v.Quiet(time.Second, "comment")
	t.Logf("relay %s killed: first comment after it on screen %s later", owner, back.Round(time.Millisecond))
}

func ids(cs []livetest.Comment) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.ID
	}
	return out
}
