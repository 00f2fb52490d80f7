package etcdfleet

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/concord-chat/concord/operator/fleet"
	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live"
)

// TestReadLiveViewers reads the viewer reports as the live gateways write
// them to the board (the registry, through the live.Board port, at
// live.ViewersKey) on a real (embedded) etcd: per gateway, summed over
// streams, stale reports left out; a registry that cannot be read is an
// error, not zero viewers.
func TestReadLiveViewers(t *testing.T) {
	ctx, endpoint := embeddedEtcd(t)
	var brd live.Board = etcdClient(t, endpoint)
	now := time.Now()
	put := func(stream snowflake.ID, gateway string, n int64, at time.Time) {
		b, _ := json.Marshal(live.ViewerReport{Count: n, At: at.UnixMilli()})
		if err := brd.Put(ctx, live.ViewersKey(stream, gateway), b, registry.Persistent); err != nil {
			t.Fatal(err)
		}
	}
	put(101, "prod-live-gateway-a", 20_000, now)
	put(102, "prod-live-gateway-a", 7_000, now.Add(-5*time.Second))
	put(101, "prod-live-gateway-b", 18_000, now)
	put(103, "prod-live-gateway-c", 9_999, now.Add(-20*time.Second)) // dead gateway: stale

	r := &Registry{Reg: etcdClient(t, endpoint)}
	got, err := ReadLiveViewers(ctx, r, DefaultLiveViewersTTL, now)
	if err != nil {
		t.Fatal(err)
	}
	want := []fleet.GatewayViewers{{Gateway: "prod-live-gateway-a", Viewers: 27_000, Streams: 2}, {Gateway: "prod-live-gateway-b", Viewers: 18_000, Streams: 1}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("viewers = %+v, want %+v", got, want)
	}
	if DefaultLiveViewersTTL != live.ViewerTTL {
		t.Fatalf("TTL %s differs from the directory's %s", DefaultLiveViewersTTL, live.ViewerTTL)
	}
	r.Reg.Close()
	if _, err := ReadLiveViewers(ctx, r, DefaultLiveViewersTTL, now); err == nil {
		t.Fatal("a closed registry read as zero viewers")
	}
}
