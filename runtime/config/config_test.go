package config

import (
	"strings"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/edge/httpserve"
)

// Complete fills every zero field from Default, so a partial Config (a
// test's, or one a command built) and Default agree.
func TestCompleteFillsDefaults(t *testing.T) {
	got, err := Config{DataDir: "/d"}.Complete()
	if err != nil {
		t.Fatal(err)
	}
	d := Default()
	if got.Store != "pebble:/d/store" {
		t.Errorf("store = %q, want pebble under the data dir", got.Store)
	}
	if got.HTTP != d.HTTP || got.GRPC != d.GRPC || got.Node != d.Node || got.EventLog != d.EventLog || got.Redis != d.Redis ||
		got.Registry != d.Registry || got.DataNodes != d.DataNodes || got.ReadStateGroup != d.ReadStateGroup {
		t.Errorf("strings not defaulted: %+v", got)
	}
	if got.LeaseTTL != d.LeaseTTL || got.RetryInterval != d.RetryInterval || got.CallTimeout != d.CallTimeout ||
		got.ShutdownTimeout != d.ShutdownTimeout || got.ReadStateFlush != d.ReadStateFlush {
		t.Errorf("durations not defaulted: %+v", got)
	}
	if got.Presence.Window != 5*time.Second || got.Presence.ReportInterval != DefaultReportInterval || got.Identify.Concurrency != 1 ||
		got.Entitlements != d.Entitlements || got.Logger == nil {
		t.Errorf("sub-structs not defaulted: %+v", got)
	}
	// Set fields are kept.
	got, err = Config{Node: "gw-1", LeaseTTL: time.Second, Presence: Presence{Window: time.Millisecond}}.Complete()
	if err != nil || got.Node != "gw-1" || got.LeaseTTL != time.Second || got.Presence.Window != time.Millisecond {
		t.Fatalf("set fields changed: %+v, %v", got, err)
	}
}

func TestCompleteRejects(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Worker: 32}, "0..31"},
		{Config{Process: -1}, "0..31"},
		{Config{DataNodes: "mesh"}, "--data-nodes"},
		{Config{EgressProxy: "https://x"}, "egress proxy"},
		{Config{PublicURL: "http://x/gateway"}, "public URL"},
		{Config{Identify: Identify{Rate: -1}}, "negative"},
		{Config{Pod: Pod{SessionsTarget: -1}}, "negative"},
		{Config{Serving: httpserve.Config{TrustedProxies: []string{"10.0.0.0/8", "lb.example"}}}, "--trusted-proxies"},
	} {
		if _, err := tc.cfg.Complete(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want %q", tc.cfg, err, tc.want)
		}
	}
}
