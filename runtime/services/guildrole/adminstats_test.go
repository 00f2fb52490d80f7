package guildrole

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/concord-chat/concord/runtime/base/adminapi"
	"github.com/concord-chat/concord/runtime/base/lifecycle"
	"github.com/concord-chat/concord/runtime/config"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/services/wiring"
	"github.com/concord-chat/concord/runtime/services/wiring/wiringtest"
)

// adminGet serves GET path on h and decodes the JSON answer into out.
func adminGet(t *testing.T, h http.Handler, path string, out any) int {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
		t.Fatalf("GET %s: decode %q: %v", path, rec.Body, err)
	}
	return rec.Code
}

// The role serves the statistics of its guilds among the process's admin
// endpoints, `concord dev` included: every loaded guild, one guild by id,
// Discord's Unknown Guild for a guild not loaded and a 404 for a
// malformed id.
func TestDevServesGuildStats(t *testing.T) {
	ctx := context.Background()
	var seams wiring.Seams
	wiring.Provide[event.Sink](&seams, wiring.Sink, make(chanSink, 64))
	parts := wiringtest.Parts(t, &seams, config.Default())
	admin := http.NewServeMux()
	parts.Admin = admin
	var group lifecycle.Group
	if err := wiring.Build(ctx, []wiring.Role{Role}, func(string) bool { return true }, parts, http.NewServeMux(), &group); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = seams.Close() })
	svc, _ := wiring.Lookup(&seams, wiring.GuildService)
	owner := wiringtest.User(t, parts, "owner").ID
	info, err := svc.CreateGuild(ctx, owner, "stats")
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.AttachSession(ctx, info.Guild.ID, event.Session{ID: "s1", UserID: owner, Node: "dev"}); err != nil {
		t.Fatal(err)
	}

	var all []adminapi.GuildSample
	if code := adminGet(t, admin, StatsPath, &all); code != http.StatusOK {
		t.Fatalf("GET %s = %d", StatsPath, code)
	}
	id := strconv.FormatUint(uint64(info.Guild.ID), 10)
	node := parts.Config.Node
	if len(all) != 1 || all[0].GuildID != id || all[0].Node != node || all[0].Online != 1 || all[0].Members != 1 ||
		all[0].EventAgeP99 <= 0 || all[0].EventAgeP50 > all[0].EventAgeP99 || all[0].VoiceCalls != 0 {
		t.Fatalf("GET %s = %+v, want guild %s on %s with 1 online, 1 member, non-zero age, no call", StatsPath, all, id, node)
	}
	var one adminapi.GuildSample
	if code := adminGet(t, admin, StatsPath+"/"+id, &one); code != http.StatusOK || one.GuildID != id || one.Online != 1 {
		t.Fatalf("GET %s/%s = %d %+v", StatsPath, id, code, one)
	}
	var e struct {
		Message string `json:"message"`
		Code    int    `json:"code"`
	}
	if code := adminGet(t, admin, StatsPath+"/12345", &e); code != http.StatusNotFound || e.Code != 10004 || e.Message != "Unknown Guild" {
		t.Fatalf("GET of a guild not loaded = %d %+v, want 404 code 10004", code, e)
	}
	if code := adminGet(t, admin, StatsPath+"/nope", &e); code != http.StatusNotFound || e.Code == 10004 {
		t.Fatalf("GET of a malformed id = %d %+v, want a plain 404", code, e)
	}
}
