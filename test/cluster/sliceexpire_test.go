//go:build integration

package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// TestSlicedOwnerKilledSliceExpires runs a relay node, two guild nodes
// with --relay-threshold=2 and a gateway+api node. A guild's three
// sessions are handed to the relay (its slice gauge shows one guild).
// The RelayTier controller then withdraws the relay from the guild's
// list and the guild node owning the guild is killed with SIGKILL, so it
// sends the relay no Drop and the guild's next owner does not use the
// relay: the relay must drop the dead owner's slice by itself (its
// owner's process has no stream open for a lease), which fails when the
// slice is kept forever. The sessions keep receiving from the new owner,
// which filters them itself; when the relay is listed again, a session
// that joins makes the new owner hand the sessions back to it with a
// snapshot of its own, and messages reach every session through it.
func TestSlicedOwnerKilledSliceExpires(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	sg := startSlicedGuild(t, ctx, "sliceexpire", 6)
	fleet, relay, relayGRPC, app := sg.fleet, sg.relay, sg.relayGRPC, sg.app
	api, owner, members, guildID, channelID := sg.api, sg.owner, sg.members, sg.guildID, sg.channelID
	node, victim := sg.ownerNode, sg.victim

	// waitGauge polls the relay's slice gauge (a metric: nothing to await).
	waitGauge := func(what string, want float64, within time.Duration) {
		t.Helper()
		limit := time.Now().Add(within)
		for metric(t, relay.http, "concord_transport_slice_guilds") != want {
			if time.Now().After(limit) {
				t.Fatalf("%s: the relay holds %v sliced guilds after %v, want %v\nrelay:\n%s", what,
					metric(t, relay.http, "concord_transport_slice_guilds"), within, want, relay.output())
			}
			<-time.After(200 * time.Millisecond)
		}
	}
	post := func(content string) string {
		t.Helper()
		limit := time.Now().Add(60 * time.Second)
		for {
			var m struct {
				ID string `json:"id"`
			}
			status, raw, err := api.do(ctx, owner.token, "POST", "/channels/"+channelID+"/messages", map[string]any{"content": content}, nil)
			if err == nil && status == 200 && json.Unmarshal(raw, &m) == nil && m.ID != "" {
				return m.ID
			}
			if time.Now().After(limit) {
				t.Fatalf("post %q: %d %s %v", content, status, raw, err)
			}
			<-time.After(250 * time.Millisecond) // the guild is moving: nothing to await but the retry
		}
	}
	gotMessage := func(id string) func([]dispatch) bool {
		return func(fs []dispatch) bool {
			for _, f := range fs {
				var m struct {
					ID string `json:"id"`
				}
				if f.Type == "MESSAGE_CREATE" && json.Unmarshal(f.D, &m) == nil && m.ID == id {
					return true
				}
			}
			return false
		}
	}

	var sessions []*wsSession
	for i := range 3 {
		s := dial(t, fmt.Sprintf("s%d", i), app.http, members[i].token)
		s.await(t, "GUILD_CREATE", 20*time.Second, func(fs []dispatch) bool { return len(guildCreates(fs, guildID)) >= 1 })
		sessions = append(sessions, s)
	}
	waitGauge("three sessions above --relay-threshold=2", 1, 30*time.Second)
	before := post("before the kill")
	for _, s := range sessions {
		s.await(t, "the message through the relay", 20*time.Second, gotMessage(before))
	}

	// The controller withdraws the relay; the owner dies without a word.
	if err := fleet.SetRelays(ctx, guildID, nil); err != nil {
		t.Fatal(err)
	}
	victim.kill()
	killed := time.Now()
	t.Logf("killed %s, the guild's owner", node)
	for _, s := range sessions {
		s.await(t, "GUILD_CREATE from the new owner", 60*time.Second, func(fs []dispatch) bool { return len(guildCreates(fs, guildID)) >= 2 })
	}
	waitGauge("the dead owner's slice", 0, 60*time.Second)
	t.Logf("the relay dropped the dead owner's slice %v after the kill (lease %v)", time.Since(killed).Round(100*time.Millisecond), leaseTTL)
	if n := metric(t, relay.http, "concord_transport_slice_expired_total"); n != 1 {
		t.Errorf("concord_transport_slice_expired_total = %v, want 1", n)
	}
	after := post("after the kill")
	for _, s := range sessions {
		s.await(t, "the message from the new owner, filtering itself", 20*time.Second, gotMessage(after))
	}

	// The relay is listed again: the next session that joins makes the
	// new owner hand every session to it. The guild node learns of the
	// list through a registry watch, so sessions join until it has.
	if err := fleet.SetRelays(ctx, guildID, []string{relayGRPC}); err != nil {
		t.Fatal(err)
	}
	for i := 3; metric(t, relay.http, "concord_transport_slice_guilds") != 1; i++ {
		if i == len(members) {
			t.Fatalf("the new owner handed no session to the relay after %d joined", i-3)
		}
		s := dial(t, fmt.Sprintf("s%d", i), app.http, members[i].token)
		s.await(t, "GUILD_CREATE", 20*time.Second, func(fs []dispatch) bool { return len(guildCreates(fs, guildID)) >= 1 })
		sessions = append(sessions, s)
		limit := time.Now().Add(3 * time.Second)
		for metric(t, relay.http, "concord_transport_slice_guilds") != 1 && time.Now().Before(limit) {
			<-time.After(200 * time.Millisecond)
		}
	}
	received := metric(t, relay.http, "concord_transport_slice_received_entries_total")
	again := post("through the relay again")
	for _, s := range sessions {
		s.await(t, "the message through the relay, new owner", 20*time.Second, gotMessage(again))
	}
	if n := metric(t, relay.http, "concord_transport_slice_received_entries_total"); n <= received {
		t.Errorf("the relay received no entry for the message (%v before, %v after): the new owner did not re-register the sessions there", received, n)
	}
}
