package placement

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live"
	"github.com/concord-chat/concord/runtime/domain/live/board"
)

func report(t *testing.T, b live.Board, stream, gw string, n int64, at time.Time) {
	t.Helper()
	v, _ := json.Marshal(live.ViewerReport{Count: n, At: at.UnixMilli()})
	if err := b.Put(context.Background(), "live/viewers/"+stream+"/"+gw, v, registry.WhileAlive); err != nil {
		t.Fatal(err)
	}
}

// Width is max(1, ceil(viewers / 25,000)): wider at once, narrower only
// after 10 minutes of fitting fewer gateways; unknown streams are 1 and
// a creator's preset width applies before any report.
func TestWidthRule(t *testing.T) {
	ctx := context.Background()
	b := board.New()
	now := time.Unix(1_000_000, 0)
	d := NewDirectory(b, DirectoryConfig{Now: func() time.Time { return now }})
	refresh := func() {
		t.Helper()
		if err := d.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if k := d.Width("1"); k != 1 {
		t.Fatalf("unknown stream width %d", k)
	}
	report(t, b, "1", "gw-a", 24_000, now)
	report(t, b, "1", "gw-b", 6_000, now)
	refresh()
	if k := d.Width("1"); k != 2 {
		t.Fatalf("30,000 viewers: width %d, want 2", k)
	}
	if l := d.Loads(); l["gw-a"] != 24_000 || l["gw-b"] != 6_000 {
		t.Fatalf("loads %v", l)
	}
	now = now.Add(5 * time.Second)
	report(t, b, "1", "gw-a", 60_001, now)
	report(t, b, "1", "gw-b", 6_000, now)
	refresh()
	if k := d.Width("1"); k != 3 {
		t.Fatalf("66,001 viewers: width %d, want 3 at once", k)
	}
	// The audience falls to 10,000: the width holds for 10 minutes.
	for range 120 {
		now = now.Add(5 * time.Second)
		report(t, b, "1", "gw-a", 5_000, now)
		report(t, b, "1", "gw-b", 5_000, now)
		refresh()
		if k := d.Width("1"); k != 3 {
			t.Fatalf("%s after the fall: width %d, want 3 until 10 minutes", now.Sub(time.Unix(1_000_010, 0)), k)
		}
	}
	now = now.Add(5 * time.Second)
	report(t, b, "1", "gw-a", 5_000, now)
	report(t, b, "1", "gw-b", 5_000, now)
	refresh()
	if k := d.Width("1"); k != 1 {
		t.Fatalf("10 minutes below: width %d, want 1", k)
	}
	// Reports older than 15 s no longer count.
	now = now.Add(16 * time.Second)
	refresh()
	if v := d.Viewers("1"); v != 0 {
		t.Fatalf("stale reports still count: %d", v)
	}

	// A creator pre-set to 4: their new stream is 4 wide before anyone
	// watches it.
	creator := snowflake.ID(77)
	rec, _ := json.Marshal(live.Stream{ID: 9, CreatorID: creator, State: live.StateLive})
	if err := b.Put(ctx, "live/streams/9", rec, registry.Persistent); err != nil {
		t.Fatal(err)
	}
	if err := SetWidth(ctx, b, creator, 4); err != nil {
		t.Fatal(err)
	}
	refresh()
	if k := d.Width("9"); k != 4 {
		t.Fatalf("preset stream width %d, want 4", k)
	}
}

// flakyBoard fails List while down.
type flakyBoard struct {
	live.Board
	down atomic.Bool
}

func (f *flakyBoard) List(ctx context.Context, prefix string) (map[string][]byte, error) {
	if f.down.Load() {
		return nil, errors.New("board unreachable")
	}
	return f.Board.List(ctx, prefix)
}

// A directory outage keeps the placements made from the last good read:
// the same gateways for a known stream, width 1 for unknown ones.
func TestOutageKeepsPlacements(t *testing.T) {
	ctx := context.Background()
	fb := &flakyBoard{Board: board.New()}
	now := time.Now()
	d := NewDirectory(fb, DirectoryConfig{})
	for i := range 8 {
		report(t, fb, "100", fmt.Sprintf("gw-%d", i), 9_000, now)
	}
	if err := d.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	p := NewPlacer(d, PlacerConfig{})
	p.SetGateways([]string{"gw-0", "gw-1", "gw-2", "gw-3", "gw-4", "gw-5", "gw-6", "gw-7"})
	before := map[string]bool{}
	for range 200 {
		c, _ := p.Pick("100")
		before[c.Gateway] = true
	}
	if d.Width("100") != 3 || len(before) != 3 {
		t.Fatalf("72,000 viewers: width %d, placed on %d gateways", d.Width("100"), len(before))
	}
	fb.down.Store(true)
	if err := d.Refresh(ctx); err == nil {
		t.Fatal("refresh succeeded on a board that is down")
	}
	if fresh, _ := d.Fresh(); fresh {
		t.Fatal("directory says fresh after a failed refresh")
	}
	for range 200 {
		c, _ := p.Pick("100")
		if !before[c.Gateway] {
			t.Fatalf("during the outage stream 100 went to %s, not one of %v", c.Gateway, before)
		}
	}
	if c, _ := p.Pick("200"); c.Width != 1 {
		t.Fatalf("unknown stream during the outage: width %d", c.Width)
	}
}

// Widening a stream only adds gateways: its first k on the ring are among
// its first k+1, so viewers already placed stay on gateways that remain
// the stream's.
func TestWidenKeepsGateways(t *testing.T) {
	var names []string
	for i := range 50 {
		names = append(names, fmt.Sprintf("gw-%02d", i))
	}
	r := NewRing(names)
	for s := range 200 {
		var order []string
		r.Walk(fmt.Sprint(s), func(n string) bool { order = append(order, n); return true })
		if len(order) != len(names) {
			t.Fatalf("walk visited %d of %d gateways", len(order), len(names))
		}
		seen := map[string]bool{}
		for _, n := range order {
			if seen[n] {
				t.Fatalf("walk visited %s twice", n)
			}
			seen[n] = true
		}
	}
	// And a gateway leaving moves only the streams it was first for.
	first := func(r *Ring, s string) (out string) {
		r.Walk(s, func(n string) bool { out = n; return false })
		return out
	}
	r2 := NewRing(names[1:])
	moved := 0
	for s := range 2000 {
		a, b := first(r, fmt.Sprint(s)), first(r2, fmt.Sprint(s))
		if a != b {
			if a != names[0] {
				t.Fatalf("stream %d moved from %s to %s when %s left", s, a, b, names[0])
			}
			moved++
		}
	}
	if moved == 0 {
		t.Fatal("the gateway that left was first for no stream")
	}
}

// No placement takes a gateway past 1.25 times the fleet average: a
// fleet of 20 gateways receives 200,000 viewers of streams whose sizes
// follow a power law (one stream of 60,000), and at every step the
// chosen gateway's load stays within the bound.
func TestBoundedLoad(t *testing.T) {
	d := NewDirectory(board.New(), DirectoryConfig{})
	p := NewPlacer(d, PlacerConfig{})
	var names []string
	for i := range 20 {
		names = append(names, fmt.Sprintf("gw-%02d", i))
	}
	p.SetGateways(names)
	rng := rand.New(rand.NewPCG(1, 2))
	load := map[string]int64{}
	var total int64
	spilled := 0
	for total < 200_000 {
		s := "big"
		if rng.IntN(10) >= 3 {
			s = fmt.Sprint(int(math.Floor(math.Pow(rng.Float64(), 3) * 5000)))
		}
		c, ok := p.Pick(s)
		if !ok {
			t.Fatal("no gateway")
		}
		load[c.Gateway]++
		total++
		if c.Spilled {
			spilled++
		}
		bound := max(Factor*float64(total)/float64(len(names)), Floor)
		if float64(load[c.Gateway]) > bound+1 {
			t.Fatalf("after %d viewers %s holds %d, above the bound %.0f", total, c.Gateway, load[c.Gateway], bound)
		}
	}
	if spilled == 0 {
		t.Fatal("the 60,000-viewer stream never spilled")
	}
}

// The seed's figure, by simulation at fleet scale: 1,000 gateways each
// holding 20,000 viewers of other streams; a stream of 1,000 viewers
// placed at random touches ~632 gateways (1,000·(1-1/e)), placed by
// affinity 1. Each comment costs one backbone copy per gateway touched.
func TestAffinityCopiesAtFleetScale(t *testing.T) {
	const gateways, viewers = 1000, 1000
	ctx := context.Background()
	b := board.New()
	now := time.Now()
	var names []string
	for i := range gateways {
		n := fmt.Sprintf("gw-%04d", i)
		names = append(names, n)
		report(t, b, fmt.Sprint(1_000_000+i), n, 20_000, now)
	}
	d := NewDirectory(b, DirectoryConfig{})
	if err := d.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	p := NewPlacer(d, PlacerConfig{})
	p.SetGateways(names)
	affinity := map[string]bool{}
	for range viewers {
		c, _ := p.Pick("42")
		affinity[c.Gateway] = true
	}
	rng := rand.New(rand.NewPCG(3, 4))
	random := map[int]bool{}
	for range viewers {
		random[rng.IntN(gateways)] = true
	}
	t.Logf("a %d-viewer stream on %d gateways: %d backbone copies per comment placed at random, %d by affinity", viewers, gateways, len(random), len(affinity))
	if len(affinity) != 1 {
		t.Fatalf("affinity placed the stream on %d gateways", len(affinity))
	}
	if want := float64(gateways) * (1 - math.Pow(1-1.0/gateways, viewers)); math.Abs(float64(len(random))-want) > 30 {
		t.Fatalf("random placement touched %d gateways, expected about %.0f", len(random), want)
	}
}
