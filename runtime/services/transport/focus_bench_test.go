package transport

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
)

// nopGuild is a GuildClient whose calls succeed and do nothing.
type nopGuild struct{ GuildClient }

func (nopGuild) LazyRequest(context.Context, snowflake.ID, event.Session, json.RawMessage) error {
	return nil
}

// BenchmarkRememberFocusMemory reports the gateway heap that remembered
// op 14 payloads (RememberFocus) hold per session, for 100,000 sessions
// that each sent the web client's op 14 (one channel, one range) to
// 1 and to 20 guilds, and to 20 guilds with a 4 KB payload each (a
// client naming many channels and members). The 4 KB case stores 10,000
// sessions, not 100,000: at 100,000 it holds ~8 GB of payloads, more
// than a shared test machine should give one benchmark, and the figure
// is per session either way.
//
//	go test ./runtime/services/transport -run XXX -bench BenchmarkRememberFocusMemory -benchtime=1x
func BenchmarkRememberFocusMemory(b *testing.B) {
	members := make([]string, 0, 200)
	for m := range 200 {
		members = append(members, fmt.Sprintf(`"%d"`, 1<<59+m))
	}
	memberList := joinComma(members)
	for _, tc := range []struct {
		name     string
		guilds   int
		big      bool
		sessions int
	}{{"web-1-guild", 1, false, 100000}, {"web-20-guilds", 20, false, 100000}, {"4KB-20-guilds", 20, true, 10000}} {
		sessions := tc.sessions
		b.Run(tc.name, func(b *testing.B) {
			for range b.N {
				heap0 := focusHeap()
				c := RememberFocus(nopGuild{}, nil)
				for i := range sessions {
					s := event.Session{ID: event.SessionID(fmt.Sprintf("session-%012d", i))}
					for g := range tc.guilds {
						guild := snowflake.ID(1<<60 + g)
						d := fmt.Sprintf(`{"guild_id":"%d","typing":true,"threads":true,"activities":true,"members":[],"channels":{"%d":[[0,99]]},"thread_member_lists":[]}`, guild, guild+1)
						if tc.big {
							d = fmt.Sprintf(`{"guild_id":"%d","typing":true,"channels":{"%d":[[0,99]]},"members":[%s]}`, guild, guild+1, memberList)
						}
						// A payload as the gateway hands it over: its own
						// copy of the frame's "d".
						raw := json.RawMessage(append([]byte(nil), d...))
						if err := c.LazyRequest(context.Background(), guild, s, raw); err != nil {
							b.Fatal(err)
						}
					}
				}
				per := float64(focusHeap()-heap0) / float64(sessions)
				b.ReportMetric(per, "B/session")
				runtime.KeepAlive(c)
			}
		})
	}
}

func joinComma(xs []string) string {
	out := ""
	for i, x := range xs {
		if i > 0 {
			out += ","
		}
		out += x
	}
	return out
}

func focusHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
