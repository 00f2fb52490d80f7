package readstate_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/readstate"
	rspebble "github.com/concord-chat/concord/runtime/domain/readstate/pebble"
)

// Ids used across tests.
const (
	guild   snowflake.ID = 1
	channel snowflake.ID = 100
	hidden  snowflake.ID = 200
	author  snowflake.ID = 10
	alice   snowflake.ID = 11
	bob     snowflake.ID = 12
	carol   snowflake.ID = 13
	mods    snowflake.ID = 50 // a role
)

// visibility lets everyone see every channel except the denied pairs.
type visibility struct {
	mu     sync.Mutex
	denied map[[2]snowflake.ID]bool
	calls  atomic.Int64
}

func (v *visibility) deny(user, ch snowflake.ID) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.denied == nil {
		v.denied = map[[2]snowflake.ID]bool{}
	}
	v.denied[[2]snowflake.ID{user, ch}] = true
}

func (v *visibility) CanView(_ context.Context, user, ch snowflake.ID) bool {
	v.calls.Add(1)
	v.mu.Lock()
	defer v.mu.Unlock()
	return !v.denied[[2]snowflake.ID{user, ch}]
}

type roles map[snowflake.ID][]snowflake.ID

func (r roles) RoleMembers(_ context.Context, _, role snowflake.ID) ([]snowflake.ID, error) {
	return r[role], nil
}

// countingStore counts records written and can be "killed": once dead,
// every write fails, as nothing more reaches the disk of a dead node.
type countingStore struct {
	readstate.Store
	users, channels, writes atomic.Int64
	dead                    atomic.Bool
}

func (c *countingStore) Write(ctx context.Context, u []readstate.Record, ch []readstate.ChannelRecord) error {
	if c.dead.Load() {
		return context.Canceled
	}
	c.writes.Add(1)
	c.users.Add(int64(len(u)))
	c.channels.Add(int64(len(ch)))
	return c.Store.Write(ctx, u, ch)
}

func newStore(t testing.TB, dir string) *countingStore {
	s, err := rspebble.New(rspebble.Config{Dir: dir, NoSync: dir == ""})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &countingStore{Store: s}
}

func newService(t testing.TB, cfg readstate.Config, st readstate.Store, vis readstate.Visibility, r readstate.Roles) *readstate.Service {
	s, err := readstate.New(cfg, st, vis, r)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// msg builds a MESSAGE_CREATE record at a given offset, as the log would
// deliver it.
func msg(t testing.TB, id snowflake.ID, off int64, ch snowflake.ID, mentions []snowflake.ID, roleIDs []snowflake.ID, everyone bool) eventlog.Record {
	ev := eventlog.MessageEvent{Type: eventlog.MessageCreate, GuildID: guild, ChannelID: ch, MessageID: id, AuthorID: author,
		Mentions: mentions, MentionRoles: roleIDs, MentionEveryone: everyone}
	r, err := ev.Record()
	if err != nil {
		t.Fatal(err)
	}
	r.Offset = off
	return r
}

func mentionCount(t testing.TB, s *readstate.Service, user, ch snowflake.ID) int {
	t.Helper()
	st, err := s.ChannelState(context.Background(), user, ch)
	if err != nil {
		t.Fatal(err)
	}
	return st.MentionCount
}

// positions reads where topic ends and what group committed, and whether
// the group has committed everything.
func positions(t testing.TB, l eventlog.Log, group, topic string) ([]int64, map[int32]int64, bool) {
	t.Helper()
	in, ok := l.(eventlog.Inspector)
	if !ok {
		t.Fatalf("%T does not implement eventlog.Inspector", l)
	}
	ctx := context.Background()
	end, err := in.End(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	off, err := in.Committed(ctx, group, topic)
	if err != nil {
		t.Fatal(err)
	}
	done := true
	for p, e := range end {
		done = done && off[int32(p)] == e
	}
	return end, off, done
}

// waitCommitted waits until group has committed every record of topic.
func waitCommitted(t testing.TB, l eventlog.Log, group, topic string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		end, off, done := positions(t, l, group, topic)
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s committed %v of %v", group, off, end)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition, bounded by the deadline
	}
}
