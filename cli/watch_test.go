package cli

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
	"github.com/concord-chat/concord/operator/fleet"
)

// frames splits a --watch table output at its screen clears.
func frames(t *testing.T, out string) []string {
	t.Helper()
	parts := strings.Split(out, clearScreen)
	if parts[0] != "" {
		t.Fatalf("output before the first screen clear: %q", parts[0])
	}
	return parts[1:]
}

// guild top --watch redraws the ranking at every tick with the figures of
// that moment: the guild that became the busiest moves to the top.
func TestGuildTopWatch(t *testing.T) {
	h := newHarness(t)
	h.ticks = 2
	h.snapshots = [][]fleet.GuildSample{
		{{GuildID: "1", EventAgeP99: 5e6}, {GuildID: "2", EventAgeP99: 1e6}},
		{{GuildID: "1", EventAgeP99: 5e6}, {GuildID: "2", EventAgeP99: 9e6}},
		{{GuildID: "1", EventAgeP99: 5e6}},
	}
	out, err := h.run("guild", "top", "--watch", "--interval", "3s")
	if err != nil {
		t.Fatal(err)
	}
	fs := frames(t, out)
	if len(fs) != 3 {
		t.Fatalf("%d frames, want the first view and one per tick:\n%s", len(fs), out)
	}
	for i, f := range fs {
		if !strings.HasPrefix(f, "Every 3s: kubectl concord guild top --by event-age    09:00:00\n\nGUILD") {
			t.Errorf("frame %d header:\n%s", i, f)
		}
	}
	first := func(f string) string { return strings.Fields(strings.Split(f, "\n")[3])[0] }
	if first(fs[0]) != "1" || first(fs[1]) != "2" || strings.Contains(fs[2], "\n2 ") {
		t.Errorf("frames do not follow the figures:\n%s", out)
	}
	if len(h.paths) != 3 {
		t.Errorf("%d admin reads, want one per frame", len(h.paths))
	}
}

// With -o json, --watch prints one document per refresh and no screen
// control codes; too short an interval is refused.
func TestWatchJSONAndErrors(t *testing.T) {
	h := newHarness(t)
	h.ticks = 1
	h.snapshots = [][]fleet.GuildSample{{{GuildID: "1"}}, {{GuildID: "3"}}}
	out, err := h.run("guild", "top", "-w", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "\x1b") || strings.Count(out, `"guildID"`) != 2 || !strings.Contains(out, `"3"`) {
		t.Fatalf("json watch output:\n%s", out)
	}
	if _, err := h.run("guild", "top", "-w", "--interval", "1ms"); err == nil || !strings.Contains(err.Error(), "--interval") {
		t.Fatalf("a 1ms interval: %v", err)
	}
}

// gateway list and voice regions take --watch too.
func TestListsWatch(t *testing.T) {
	h := newHarness(t, &concordv1.VoiceRegion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "eu"},
		Spec: concordv1.VoiceRegionSpec{Region: "eu-west"}})
	h.ticks = 1
	for _, args := range [][]string{{"gateway", "list", "--watch"}, {"voice", "regions", "--watch"}} {
		out, err := h.run(args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		fs := frames(t, out)
		if len(fs) != 2 || !strings.Contains(fs[1], "kubectl concord "+args[0]+" "+args[1]) {
			t.Errorf("%v: %d frames:\n%s", args, len(fs), out)
		}
	}
}

// live streams reads the live-api Service's admin endpoint and takes
// --watch like the other views.
func TestLiveStreams(t *testing.T) {
	h := newHarness(t)
	h.streams = []LiveStream{{StreamID: "77", Viewers: 120000, Gateways: 3, Sampled: true}, {StreamID: "78", Viewers: 40, Gateways: 1}}
	out, err := h.run("live", "streams", "--limit", "5")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || strings.Fields(lines[1])[0] != "77" || strings.Fields(lines[1])[1] != "120000" || strings.Fields(lines[2])[0] != "78" {
		t.Fatalf("output:\n%s", out)
	}
	if last := h.paths[len(h.paths)-1]; last != "/api/v1/namespaces/chat/services/http:prod-live-api:admin/proxy/admin/live/streams" || h.query != "limit=5" {
		t.Errorf("read %s?%s", last, h.query)
	}
	h.ticks = 1
	out, err = h.run("live", "streams", "-w")
	if err != nil {
		t.Fatal(err)
	}
	if fs := frames(t, out); len(fs) != 2 || !strings.Contains(fs[1], "kubectl concord live streams") {
		t.Errorf("watch output:\n%s", out)
	}
}
