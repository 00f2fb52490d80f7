package etcdfleet

import (
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/domain/voice"
	voicefleet "github.com/concord-chat/concord/runtime/domain/voice/fleet"
)

// TestReadVoiceLoad reads what the SFU's own reporter writes, on a real
// (embedded) etcd, and refuses stale or missing reports.
func TestReadVoiceLoad(t *testing.T) {
	ctx, endpoint := embeddedEtcd(t)
	sfu := etcdClient(t, endpoint)
	if _, err := sfu.Register(ctx, registry.Node{Name: "eu-sfu-abcde", Roles: []string{"voice"}, Addr: "127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Truncate(time.Millisecond)
	rep := voicefleet.Reporter{Registry: sfu}
	if err := rep.ReportLoad(ctx, voice.Load{Server: "eu-sfu-abcde", Region: "eu-west", Endpoint: "203.0.113.7:8443",
		Calls: 3, Participants: 17, PacketsForwarded: 1234.5, LossRatio: 0.25, Jitter: 3 * time.Millisecond, RTT: 45 * time.Millisecond, Draining: true, At: at}); err != nil {
		t.Fatal(err)
	}

	r := &Registry{Reg: etcdClient(t, endpoint)}
	l, err := ReadVoiceLoad(ctx, r, "eu-sfu-abcde", DefaultVoiceLoadTTL, at.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if l.ActiveCalls != 3 || l.Participants != 17 || !l.Draining || l.Endpoint != "203.0.113.7:8443" || l.PacketsForwarded != 1234.5 || !l.At.Equal(at) ||
		l.LossRatio != 0.25 || l.Jitter != 3*time.Millisecond || l.RTT != 45*time.Millisecond {
		t.Fatalf("load = %+v", l)
	}
	if _, err := ReadVoiceLoad(ctx, r, "eu-sfu-abcde", DefaultVoiceLoadTTL, at.Add(10*time.Second)); err == nil {
		t.Fatal("a 10 s old report was accepted")
	}
	if _, err := ReadVoiceLoad(ctx, r, "eu-sfu-zzzzz", DefaultVoiceLoadTTL, at); err == nil {
		t.Fatal("a server without a report has a load")
	}
}
