package guildrole

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/concord-chat/concord/runtime/base/adminapi"
	"github.com/concord-chat/concord/runtime/base/lifecycle"
	"github.com/concord-chat/concord/runtime/config"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/services/wiring"
	"github.com/concord-chat/concord/runtime/services/wiring/wiringtest"
)

// With --guild-metrics-top=1 the role's registry carries labelled series
// for the one busiest guild only, with the figures GET /admin/guilds/{id}
// reports for it.
func TestTopGuildMetricsMatchAdminStats(t *testing.T) {
	ctx := context.Background()
	var seams wiring.Seams
	wiring.Provide[event.Sink](&seams, wiring.Sink, make(chanSink, 256))
	cfg := config.Default()
	cfg.GuildMetricsTop = 1
	parts := wiringtest.Parts(t, &seams, cfg)
	reg := prometheus.NewRegistry()
	parts.Metrics = reg
	admin := http.NewServeMux()
	parts.Admin = admin
	var group lifecycle.Group
	if err := wiring.Build(ctx, []wiring.Role{Role}, func(string) bool { return true }, parts, http.NewServeMux(), &group); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = seams.Close() })
	svc, _ := wiring.Lookup(&seams, wiring.GuildService)
	owner := wiringtest.User(t, parts, "owner").ID
	quiet, err := svc.CreateGuild(ctx, owner, "quiet")
	if err != nil {
		t.Fatal(err)
	}
	busy, err := svc.CreateGuild(ctx, owner, "busy")
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.AttachSession(ctx, quiet.Guild.ID, event.Session{ID: "q", UserID: owner, Node: "dev"}); err != nil {
		t.Fatal(err)
	}
	// The busy guild's actor runs 20 more operations than the quiet one's.
	for i := range 20 {
		s := event.Session{ID: event.SessionID("b" + strconv.Itoa(i)), UserID: owner, Node: "dev"}
		if err := svc.AttachSession(ctx, busy.Guild.ID, s); err != nil {
			t.Fatal(err)
		}
	}

	var st adminapi.GuildSample
	id := strconv.FormatUint(uint64(busy.Guild.ID), 10)
	if code := adminGet(t, admin, StatsPath+"/"+id, &st); code != http.StatusOK {
		t.Fatalf("GET %s/%s = %d", StatsPath, id, code)
	}
	want := fmt.Sprintf(`
# HELP concord_guild_top_mailbox_length_messages Operations waiting in the mailbox of each of the busiest guilds' actors.
# TYPE concord_guild_top_mailbox_length_messages gauge
concord_guild_top_mailbox_length_messages{guild=%[1]q} %[2]d
`, id, st.QueueLength)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "concord_guild_top_mailbox_length_messages"); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	ages := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "concord_guild_top_event_age_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["guild"] != id {
				t.Fatalf("event age series of guild %s, want only %s", labels["guild"], id)
			}
			ages[labels["quantile"]] = m.GetGauge().GetValue()
		}
	}
	if len(ages) != 2 || ages["0.5"] != st.EventAgeP50.Seconds() || ages["0.99"] != st.EventAgeP99.Seconds() || st.EventAgeP99 <= 0 {
		t.Fatalf("event age series %v, want p50 %v and p99 %v as the admin API reports", ages, st.EventAgeP50.Seconds(), st.EventAgeP99.Seconds())
	}
}
