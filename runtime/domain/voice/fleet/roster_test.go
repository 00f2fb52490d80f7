package fleet

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/voice"
	"github.com/concord-chat/concord/runtime/domain/voice/token"
)

// TestRosterWaitsForFirstRead: a fleet asked for a roster before it read
// the load reports (a guild node that just started) does not answer
// "nobody" but waits, and says so when its wait ends first; after the
// first read a guild no report lists costs no request.
func TestRosterWaitsForFirstRead(t *testing.T) {
	reg := &memRegistry{kv: map[string][]byte{}}
	f := NewRegistry(reg, RegistryConfig{})
	key, _ := token.GenerateKey()
	f.UseSigningKey(key)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if ps, err := f.Roster(ctx, 42); err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no load reports read yet") {
		t.Fatalf("roster before the first read: %v, %v; want a wait that ran out", ps, err)
	}
	_ = (Reporter{Registry: reg}).ReportLoad(context.Background(), voice.Load{Server: "sfu-a", Guilds: []snowflake.ID{7}, At: time.Now()})
	if err := f.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Guild 42 is listed by no report: nothing is asked (the nodes'
	// addresses were never read, so a request would fail).
	if ps, err := f.Roster(context.Background(), 42); err != nil || len(ps) != 0 {
		t.Fatalf("roster of a guild without calls: %v, %v", ps, err)
	}
	if got := hosting(f.live(), 7); len(got) != 1 || got[0].Server != "sfu-a" {
		t.Fatalf("servers hosting guild 7: %+v", got)
	}
	if got := hosting([]voice.Load{{Server: "big", GuildsOmitted: true}}, 42); len(got) != 1 {
		t.Fatalf("a server that omits its guilds is asked for every guild: %+v", got)
	}
}
