package guild

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/fanout"
	"github.com/concord-chat/concord/runtime/domain/permissions"
)

// visMeter is a Slicer that passes entries on to in-process relays and
// counts the encoded bytes of those carrying a channel list.
type visMeter struct {
	*fanout.Local
	mu      sync.Mutex
	entries int
	bytes   int
	// channels is how many channel objects the last one carried.
	channels int
}

func (m *visMeter) Send(ctx context.Context, relay string, e *fanout.Entry) error {
	if e.Visibility != nil && !e.Reset {
		raw, _ := json.Marshal(e)
		m.mu.Lock()
		m.entries++
		m.bytes += len(raw)
		m.channels = len(e.Visibility.Channels)
		m.mu.Unlock()
	}
	return m.Local.Send(ctx, relay, e)
}

// take returns the entries and bytes counted since the last take.
func (m *visMeter) take() (entries, bytes int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	entries, bytes = m.entries, m.bytes
	m.entries, m.bytes = 0, 0
	return entries, bytes
}

// visRun is a sliced guild of 3 relays with extra text channels.
type visRun struct {
	*slicedRun
	meter *visMeter
}

func newVisRun(tb testing.TB, channels int) *visRun {
	f := newFixture(tb)
	r := &visRun{slicedRun: &slicedRun{f: f, chans: make(map[string]snowflake.ID)}}
	r.meter = &visMeter{Local: fanout.NewLocal(f.sink, 3, 1024)}
	tb.Cleanup(r.meter.Close)
	r.local = r.meter.Local
	svc, err := NewService(Config{Now: f.clock.Now, SliceThreshold: 10, SliceSize: 10}, Deps{Store: f.store, Sink: f.sink, IDs: f.ids, Auth: f.auth, Slices: r.meter})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { svc.Close() })
	f.svc = svc
	r.owner = f.user("owner", false)
	r.guild = must[GuildInfo](tb)(svc.CreateGuild(bg, r.owner.ID, "big")).Guild.ID
	for i := range channels {
		c := must[store.Channel](tb)(svc.Channels.Create(bg, r.owner.ID, r.guild, ChannelSpec{Name: fmt.Sprintf("c%03d", i), Type: store.ChannelText}))
		r.chans[c.Name] = c.ID
	}
	name := "mods"
	r.mods = must[store.Role](tb)(svc.Roles.Create(bg, r.owner.ID, r.guild, RoleSpec{Name: &name})).ID
	for i := range 30 {
		u := f.user(fmt.Sprintf("u%02d", i), false)
		must[store.Member](tb)(func() (store.Member, error) { m, _, err := svc.Members.Add(bg, r.guild, u.ID); return m, err }())
		r.users = append(r.users, u)
		s := event.Session{ID: event.SessionID(fmt.Sprintf("s%02d", i)), UserID: u.ID, Intents: IntentGuilds | IntentGuildMessages, Node: "node-0"}
		if err := svc.Subscribe(bg, s); err != nil {
			tb.Fatal(err)
		}
		r.sess = append(r.sess, s)
	}
	r.sync(tb)
	r.meter.take()
	return r
}

// sync waits until the actor ran everything before and the relays
// applied what it sent them.
func (r *visRun) sync(tb testing.TB) {
	if _, err := r.f.svc.Channels.List(bg, r.owner.ID, r.guild); err != nil {
		tb.Fatal(err)
	}
	if err := r.local.Sync(context.Background()); err != nil {
		tb.Fatal(err)
	}
}

// change is one permission change of the measurements.
type change struct {
	name string
	do   func(tb testing.TB, r *visRun, i int)
	// updated is the channel the change updates, if any.
	updated func(r *visRun) snowflake.ID
}

var visChanges = []change{
	{name: "role permissions", do: func(tb testing.TB, r *visRun, i int) {
		perms := uint64(permissions.ViewChannel)
		if i%2 == 1 {
			perms |= uint64(permissions.ManageThreads)
		}
		if _, err := r.f.svc.Roles.Modify(bg, r.owner.ID, r.guild, r.mods, RoleSpec{Permissions: &perms}); err != nil {
			tb.Fatal(err)
		}
	}},
	{name: "overwrite on one channel", do: func(tb testing.TB, r *visRun, i int) {
		ow := store.Overwrite{ID: r.mods, Type: store.OverwriteRole, Deny: uint64(permissions.ViewChannel)}
		if i%2 == 1 {
			ow.Deny = uint64(permissions.SendMessages)
		}
		if err := r.f.svc.Channels.PutOverwrite(bg, r.owner.ID, r.chans["c000"], ow); err != nil {
			tb.Fatal(err)
		}
	}, updated: func(r *visRun) snowflake.ID { return r.chans["c000"] }},
}

// TestSlicedVisibilityDelta: after the snapshot, a role's permissions
// changing sends each relay an entry without any channel object (the
// relays hold the list; the permission state travels as Changes), and an
// overwrite on one channel sends that channel only — not the guild's 40
// channels with their payloads. TestSlicedGuildMatchesOwner checks that
// the sessions still get the same channel events as from the owner.
func TestSlicedVisibilityDelta(t *testing.T) {
	r := newVisRun(t, 40)
	for _, want := range []struct {
		c        change
		channels int
	}{{visChanges[0], 0}, {visChanges[1], 1}} {
		want.c.do(t, r, 0)
		r.sync(t)
		entries, _ := r.meter.take()
		if entries != 3 || r.meter.channels != want.channels {
			t.Errorf("%s: %d entries, the last with %d channel objects; want 3 (one per relay) with %d", want.c.name, entries, r.meter.channels, want.channels)
		}
	}
}

// BenchmarkSlicedVisibilityBytes reports the bytes of the entry a relay
// gets for a permission change, as sent (what changed) against the
// whole channel list the owner sent before (computed in the same run
// for the same change), for guilds of 10 and 100 text channels.
//
//	go test ./runtime/domain/guild -run XXX -bench BenchmarkSlicedVisibilityBytes -benchtime=20x
func BenchmarkSlicedVisibilityBytes(b *testing.B) {
	for _, n := range []int{10, 100} {
		for _, c := range visChanges {
			b.Run(fmt.Sprintf("channels=%d/%s", n, c.name), func(b *testing.B) {
				r := newVisRun(b, n)
				var sent, full, entries int
				for i := range b.N {
					c.do(b, r, i)
					r.sync(b)
					e, by := r.meter.take()
					entries += e
					sent += by
					var upd map[snowflake.ID]bool
					if c.updated != nil {
						upd = map[snowflake.ID]bool{c.updated(r): true}
					}
					full += r.fullEntryBytes(b, upd) * e
				}
				b.ReportMetric(float64(sent)/float64(entries), "B/entry")
				b.ReportMetric(float64(full)/float64(entries), "B/full-entry")
				b.ReportMetric(float64(full)/float64(sent), "x-smaller")
			})
		}
	}
}

// fullEntryBytes is the size of the entry the owner sent each relay for
// a guild-wide permission change before entries carried deltas: the
// whole channel list with every payload.
func (r *visRun) fullEntryBytes(tb testing.TB, updated map[snowflake.ID]bool) int {
	var n int
	err := r.f.svc.do(bg, r.guild, func(a *Actor) error {
		st := a.sliced
		raw, err := json.Marshal(&fanout.Entry{Guild: a.id, Owner: st.owner, Version: st.version, Visibility: a.sliceVisibility(updated, nil, 0)})
		n = len(raw)
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return n
}
