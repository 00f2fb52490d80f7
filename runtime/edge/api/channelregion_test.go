package api

import (
	"context"
	"fmt"
	"testing"

	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/domain/voice/token"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// twoRegions is a voice fleet with one server in each of eu and us.
type twoRegions struct{}

func (twoRegions) Pick(_ context.Context, region string) (guild.VoiceServer, error) {
	if region == "us" {
		return guild.VoiceServer{ID: "sfu-us", Endpoint: "10.0.0.2:4443", Region: "us"}, nil
	}
	return guild.VoiceServer{ID: "sfu-eu", Endpoint: "10.0.0.1:4443", Region: "eu"}, nil
}
func (twoRegions) Healthy(string) bool { return true }
func (twoRegions) Regions() []guild.VoiceRegion {
	return []guild.VoiceRegion{{ID: "eu", Name: "eu"}, {ID: "us", Name: "us"}}
}

// TestChannelRTCRegion: a voice channel's rtc_region is set at creation
// and by PATCH to a region GET /voice/regions lists, read back from GET,
// reset with null; an unknown region is refused with Discord's form
// error and changes nothing; text channels carry no rtc_region.
func TestChannelRTCRegion(t *testing.T) {
	e := newEnv(t)
	e.inProcess("it gives the guild service an allocator of two fake regions")
	key, err := token.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.guilds.Voice.Enable(guild.VoiceConfig{Allocator: twoRegions{}, Key: key, FailoverInterval: -1}); err != nil {
		t.Fatal(err)
	}
	alice := e.register("alice", false)
	var g wire.Guild
	e.ok("POST", v10+"/guilds", alice.Token, map[string]any{"name": "regions"}, &g)
	chans := fmt.Sprintf("%s/guilds/%d/channels", v10, g.ID)

	region := func(r resp) *string {
		t.Helper()
		var raw map[string]any
		r.json(t, &raw)
		if _, ok := raw["rtc_region"]; !ok {
			t.Fatalf("no rtc_region in %s", r.Body)
		}
		var out struct {
			RTCRegion *string `json:"rtc_region"`
		}
		r.json(t, &out)
		return out.RTCRegion
	}
	var ch wire.Channel
	r := e.ok("POST", chans, alice.Token, map[string]any{"name": "call", "type": 2, "rtc_region": "us"}, &ch)
	if got := region(r); got == nil || *got != "us" {
		t.Fatalf("created with rtc_region us: %s", r.Body)
	}
	path := fmt.Sprintf("%s/channels/%d", v10, ch.ID)
	if got := region(e.ok("GET", path, alice.Token, nil, nil)); got == nil || *got != "us" {
		t.Fatalf("GET after create: rtc_region %v", got)
	}

	bad := e.fail("PATCH", path, alice.Token, map[string]any{"rtc_region": "mars"}, 400, 50035)
	var fe struct {
		Message string `json:"message"`
		Errors  map[string]struct {
			Errors []struct{ Code, Message string } `json:"_errors"`
		} `json:"errors"`
	}
	bad.json(t, &fe)
	if c := fe.Errors["rtc_region"].Errors; fe.Message != "Invalid Form Body" || len(c) != 1 || c[0].Code != "BASE_TYPE_CHOICES" ||
		c[0].Message != "Value must be one of ('eu', 'us')." {
		t.Fatalf("unknown region error = %s", bad.Body)
	}
	e.fail("POST", chans, alice.Token, map[string]any{"name": "x", "type": 2, "rtc_region": "mars"}, 400, 50035)
	if got := region(e.ok("GET", path, alice.Token, nil, nil)); got == nil || *got != "us" {
		t.Fatalf("a refused PATCH changed rtc_region to %v", got)
	}

	if got := region(e.ok("PATCH", path, alice.Token, map[string]any{"rtc_region": "eu"}, nil)); got == nil || *got != "eu" {
		t.Fatalf("PATCH to eu: %v", got)
	}
	// A PATCH without the field keeps it.
	if got := region(e.ok("PATCH", path, alice.Token, map[string]any{"name": "renamed"}, nil)); got == nil || *got != "eu" {
		t.Fatalf("PATCH of the name: rtc_region %v", got)
	}
	if got := region(e.ok("PATCH", path, alice.Token, map[string]any{"rtc_region": nil}, nil)); got != nil {
		t.Fatalf("PATCH to null: rtc_region %q", *got)
	}
	if got := region(e.ok("GET", path, alice.Token, nil, nil)); got != nil {
		t.Fatalf("GET after null: rtc_region %q", *got)
	}

	var text map[string]any
	e.ok("POST", chans, alice.Token, map[string]any{"name": "chat", "type": 0}, &text)
	if _, ok := text["rtc_region"]; ok {
		t.Fatalf("a text channel carries rtc_region: %v", text)
	}
}

// TestVoiceRegionsOptimal: GET /voice/regions marks the guild node's own
// region optimal, and only it.
func TestVoiceRegionsOptimal(t *testing.T) {
	e := newEnv(t)
	e.inProcess("it gives the guild service an allocator of two fake regions")
	key, err := token.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.guilds.Voice.Enable(guild.VoiceConfig{Allocator: twoRegions{}, Key: key, FailoverInterval: -1, Region: "us"}); err != nil {
		t.Fatal(err)
	}
	alice := e.register("alice", false)
	var regions []voiceRegion
	e.ok("GET", v10+"/voice/regions", alice.Token, nil, &regions)
	if len(regions) != 2 || regions[0].ID != "eu" || regions[0].Optimal || regions[1].ID != "us" || !regions[1].Optimal {
		t.Fatalf("GET /voice/regions = %+v, want eu and us with us optimal", regions)
	}
}
