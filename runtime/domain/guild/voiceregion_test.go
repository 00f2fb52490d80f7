package guild

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/voice/token"
)

// regionalFleet is a unit-test allocator with servers in two regions and
// gateway nodes that have a region, picking as the fleet does: the
// lowest-id healthy server of the region asked for, any region's when it
// has none.
type regionalFleet struct {
	mu      sync.Mutex
	servers []VoiceServer
	dead    map[string]bool
	nodes   map[string]string
}

func (r *regionalFleet) Pick(_ context.Context, region string) (VoiceServer, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var other []VoiceServer
	for _, s := range r.servers {
		if r.dead[s.ID] {
			continue
		}
		if s.Region == region {
			return s, nil
		}
		other = append(other, s)
	}
	if len(other) == 0 {
		return VoiceServer{}, errors.New("no server")
	}
	return other[0], nil
}

func (r *regionalFleet) Healthy(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.dead[id]
}

func (r *regionalFleet) Regions() []VoiceRegion {
	return []VoiceRegion{{ID: "eu", Name: "eu"}, {ID: "us", Name: "us"}}
}

func (r *regionalFleet) NodeRegion(node string) string { return r.nodes[node] }

// newRegionFixture: alice's gateway node is in eu, bob's in us, the
// owner's node runs no voice server (the guild node's region, eu, is
// its fallback).
func newRegionFixture(t *testing.T) (*voiceFixture, *regionalFleet) {
	t.Helper()
	fl := &regionalFleet{servers: []VoiceServer{
		{ID: "sfu-eu", Endpoint: "10.0.0.1:4443", Region: "eu"},
		{ID: "sfu-us", Endpoint: "10.0.0.2:4443", Region: "us"},
	}, dead: map[string]bool{}, nodes: map[string]string{"node-a": "eu", "node-b": "us"}}
	f := &voiceFixture{fixture: newFixture(t)}
	var err error
	if f.key, err = token.GenerateKey(); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Voice.Enable(VoiceConfig{Allocator: fl, Key: f.key, FailoverInterval: -1, Region: "eu"}); err != nil {
		t.Fatal(err)
	}
	f.owner, f.alice, f.bob = f.user("owner", false), f.user("alice", false), f.user("bob", false)
	f.gid = must[GuildInfo](t)(f.svc.CreateGuild(bg, f.owner.ID, "regions")).Guild.ID
	for _, u := range []store.User{f.alice, f.bob} {
		if _, _, err := f.svc.Members.Add(bg, f.gid, u.ID); err != nil {
			t.Fatal(err)
		}
	}
	f.ownerS = f.session(f.owner, "o1", 0, 1)
	f.aliceS = f.session(f.alice, "a1", 0, 1)
	f.bobS = f.session(f.bob, "b1", 0, 1)
	return f, fl
}

func (f *voiceFixture) voiceChannel(t *testing.T, name, region string) store.Channel {
	t.Helper()
	return must[store.Channel](t)(f.svc.Channels.Create(bg, f.owner.ID, f.gid,
		ChannelSpec{Name: name, Type: store.ChannelVoice, RTCRegion: region}))
}

// serverOf returns the server named by the token of s's last
// VOICE_SERVER_UPDATE and the number of updates s got.
func (f *voiceFixture) serverOf(t *testing.T, s event.Session) (string, int) {
	t.Helper()
	sus := f.serverUpdates(s)
	if len(sus) == 0 {
		t.Fatalf("session %s got no VOICE_SERVER_UPDATE", s.ID)
	}
	v := token.Verifier{Keys: []ed25519.PublicKey{f.key.Public().(ed25519.PublicKey)}}
	c, err := v.Verify(sus[len(sus)-1].Token, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return c.Server, len(sus)
}

// TestVoiceCallRegion: a channel with rtc_region puts its call there
// whoever joins first; an automatic channel's call goes to the region of
// the first joiner's gateway node (the guild node's region when the fleet
// knows none for it), and later joiners follow the call.
func TestVoiceCallRegion(t *testing.T) {
	f, _ := newRegionFixture(t)
	pinned := f.voiceChannel(t, "pinned", "us")
	auto1 := f.voiceChannel(t, "auto-1", "")
	auto2 := f.voiceChannel(t, "auto-2", "")
	for _, c := range []struct {
		first, later event.Session
		ch           store.Channel
		want         string
	}{
		{f.aliceS, f.bobS, pinned, "sfu-us"}, // alice is nearest eu, the channel says us
		{f.bobS, f.aliceS, auto1, "sfu-us"},  // bob first: his node's region
		{f.ownerS, f.bobS, auto2, "sfu-eu"},  // the owner's node has no region: the guild node's
	} {
		for _, s := range []event.Session{c.first, c.later} {
			if err := f.join(s, c.ch.ID); err != nil {
				t.Fatal(err)
			}
			if got, _ := f.serverOf(t, s); got != c.want {
				t.Fatalf("channel %s (rtc_region %q): session %s was sent to %s, want %s", c.ch.Name, c.ch.RTCRegion, s.ID, got, c.want)
			}
		}
		for _, s := range []event.Session{c.first, c.later} {
			if err := f.join(s, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestVoiceRegionFallback: a channel whose region has no healthy server
// still gets a call, on another region's server.
func TestVoiceRegionFallback(t *testing.T) {
	f, fl := newRegionFixture(t)
	ch := f.voiceChannel(t, "pinned", "us")
	fl.mu.Lock()
	fl.dead["sfu-us"] = true
	fl.mu.Unlock()
	if err := f.join(f.bobS, ch.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.serverOf(t, f.bobS); got != "sfu-eu" {
		t.Fatalf("with us down the call went to %s, want sfu-eu", got)
	}
}

// TestVoiceRegionChangeMovesCall: setting rtc_region on a channel with a
// live call moves the call: every session in it gets a VOICE_SERVER_UPDATE
// for the new region's server, and CHANNEL_UPDATE and a later
// GUILD_CREATE carry the region. Setting it back to automatic leaves the
// call where it is.
func TestVoiceRegionChangeMovesCall(t *testing.T) {
	f, _ := newRegionFixture(t)
	ch := f.voiceChannel(t, "call", "")
	for _, s := range []event.Session{f.aliceS, f.bobS} {
		if err := f.join(s, ch.ID); err != nil {
			t.Fatal(err)
		}
		if got, _ := f.serverOf(t, s); got != "sfu-eu" {
			t.Fatalf("%s joined on %s, want sfu-eu (alice, first, is nearest eu)", s.ID, got)
		}
	}
	us := "us"
	out, err := f.svc.Channels.Modify(bg, f.owner.ID, ch.ID, ChannelPatch{RTCRegion: &us})
	if err != nil || out.RTCRegion != "us" {
		t.Fatalf("ModifyChannel: %+v, %v", out, err)
	}
	for _, s := range []event.Session{f.aliceS, f.bobS} {
		f.sink.waitFor(t, s.ID, "a second VOICE_SERVER_UPDATE", func([]delivered) bool { return len(f.serverUpdates(s)) == 2 })
		if got, _ := f.serverOf(t, s); got != "sfu-us" {
			t.Fatalf("%s after the region change: %s, want sfu-us", s.ID, got)
		}
		if sus := f.serverUpdates(s); sus[1].Endpoint != "10.0.0.2:4443" {
			t.Fatalf("%s: endpoint %q", s.ID, sus[1].Endpoint)
		}
	}
	ds := f.sink.waitFor(t, f.ownerS.ID, "CHANNEL_UPDATE", func(ds []delivered) bool { return count(ds, "CHANNEL_UPDATE") > 0 })
	i := slices.IndexFunc(ds, func(d delivered) bool { return d.Type == "CHANNEL_UPDATE" })
	var cu struct {
		RTCRegion *string `json:"rtc_region"`
	}
	if err := json.Unmarshal(ds[i].Payload, &cu); err != nil || cu.RTCRegion == nil || *cu.RTCRegion != "us" {
		t.Fatalf("CHANNEL_UPDATE %s: rtc_region %v, %v", ds[i].Payload, cu.RTCRegion, err)
	}
	o2 := f.session(f.owner, "o2", 0, 1)
	gc := f.sink.of(o2.ID)
	i = slices.IndexFunc(gc, func(d delivered) bool { return d.Type == "GUILD_CREATE" })
	var g struct {
		Channels []struct {
			Name      string  `json:"name"`
			RTCRegion *string `json:"rtc_region"`
		} `json:"channels"`
	}
	if err := json.Unmarshal(gc[i].Payload, &g); err != nil {
		t.Fatal(err)
	}
	if j := slices.IndexFunc(g.Channels, func(c struct {
		Name      string  `json:"name"`
		RTCRegion *string `json:"rtc_region"`
	}) bool {
		return c.Name == "call" && c.RTCRegion != nil && *c.RTCRegion == "us"
	}); j < 0 {
		t.Fatalf("GUILD_CREATE channels lack call with rtc_region us: %s", gc[i].Payload)
	}
	// A joiner now follows the call to us.
	if err := f.join(f.ownerS, ch.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.serverOf(t, f.ownerS); got != "sfu-us" {
		t.Fatalf("owner joined on %s, want sfu-us", got)
	}
	auto := ""
	if _, err := f.svc.Channels.Modify(bg, f.owner.ID, ch.ID, ChannelPatch{RTCRegion: &auto}); err != nil {
		t.Fatal(err)
	}
	// ModifyChannel returns after its dispatches were delivered.
	for _, s := range []event.Session{f.aliceS, f.bobS} {
		if _, n := f.serverOf(t, s); n != 2 {
			t.Fatalf("%s got %d VOICE_SERVER_UPDATEs after rtc_region went automatic, want still 2", s.ID, n)
		}
	}
}
