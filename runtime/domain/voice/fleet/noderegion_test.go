package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/domain/voice"
)

// TestNodeRegion: a gateway node's region is the region of the healthy
// voice servers reporting from it (a server without a Node reports as its
// own id); draining and stale servers and unknown nodes give none.
func TestNodeRegion(t *testing.T) {
	ctx := context.Background()
	reg := &memRegistry{kv: map[string][]byte{}}
	now := time.Unix(1000, 0)
	f := NewRegistry(reg, RegistryConfig{TTL: 6 * time.Second, Now: func() time.Time { return now }})
	rep := Reporter{Registry: reg}
	for _, l := range []voice.Load{
		{Server: "sfu-eu", Region: "eu", Node: "node-1", Endpoint: "10.0.0.1:443", At: now},
		{Server: "sfu-us", Region: "us", Node: "node-2", Endpoint: "10.0.0.2:443", At: now},
		{Server: "sfu-ap", Region: "ap", Node: "node-3", Endpoint: "10.0.0.3:443", At: now, Draining: true},
		{Server: "sfu-old", Region: "sa", Node: "node-4", Endpoint: "10.0.0.4:443", At: now.Add(-time.Minute)},
		{Server: "solo", Region: "af", Endpoint: "10.0.0.5:443", At: now},
	} {
		if err := rep.ReportLoad(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	for node, want := range map[string]string{"node-1": "eu", "node-2": "us", "node-3": "", "node-4": "", "solo": "af", "elsewhere": ""} {
		if got := f.NodeRegion(node); got != want {
			t.Errorf("NodeRegion(%q) = %q, want %q", node, got, want)
		}
	}
}
