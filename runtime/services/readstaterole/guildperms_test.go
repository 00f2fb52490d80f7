package readstaterole

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/adapters/store/pebble"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/services/transport"
)

// flakyOwner is a guild client whose owner is unreachable for the first
// fails calls, then answers visible.
type flakyOwner struct {
	transport.GuildClient
	fails, calls int
	err          error
}

func (f *flakyOwner) CanView(context.Context, snowflake.ID, snowflake.ID, snowflake.ID) (bool, error) {
	f.calls++
	if f.calls <= f.fails {
		return false, f.err
	}
	return true, nil
}

// TestCanViewWaitsForTheOwner: a visibility check while the guild's owner
// is down waits for an owner that answers instead of counting the user as
// unable to see (which drops the mention being consumed); an invalid
// request is not retried, and the wait is bounded.
func TestCanViewWaitsForTheOwner(t *testing.T) {
	ctx := context.Background()
	st, err := pebble.New(pebble.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	const gid, ch = snowflake.ID(10), snowflake.ID(11)
	if err := st.PutChannel(ctx, store.Channel{ID: ch, GuildID: gid, Name: "general"}); err != nil {
		t.Fatal(err)
	}
	local := guild.NewReader(st, nil)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	down := &flakyOwner{fails: 3, err: transport.ErrUnavailable}
	if !(guildPerms{local: local, guilds: down, log: log}).CanView(ctx, 1, ch) {
		t.Fatal("a check during the owner's outage answered cannot-see")
	}
	if down.calls != 4 {
		t.Fatalf("%d calls, want 3 failures then the answer", down.calls)
	}
	bad := &flakyOwner{fails: 100, err: transport.ErrInvalid}
	if (guildPerms{local: local, guilds: bad, log: log}).CanView(ctx, 1, ch) || bad.calls != 1 {
		t.Fatalf("an invalid request: %d calls, want 1 and cannot-see", bad.calls)
	}
	gone := &flakyOwner{fails: 1 << 30, err: errors.New("connection refused")}
	start := time.Now()
	if (guildPerms{local: local, guilds: gone, log: log, ownerWait: 300 * time.Millisecond}).CanView(ctx, 1, ch) {
		t.Fatal("an owner that never answers made the channel visible")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("the bounded wait took %v", d)
	}
}
