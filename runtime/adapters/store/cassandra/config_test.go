package cassandra

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

func TestParseURL(t *testing.T) {
	cfg, err := ParseURL("cassandra://127.0.0.1:9042,10.0.0.2/concord?consistency=one&rf=3&dc=eu&timeout=2s")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Hosts, []string{"127.0.0.1:9042", "10.0.0.2"}) || cfg.Keyspace != "concord" ||
		cfg.Consistency != "ONE" || cfg.ReplicationFactor != 3 || cfg.DataCenter != "eu" || cfg.Timeout != 2*time.Second {
		t.Fatalf("ParseURL: %+v", cfg)
	}
	cfg, err = ParseURL("scylla://db:9042")
	if err != nil || cfg.Keyspace != "" || cfg.withDefaults().Keyspace != "concord" {
		t.Fatalf("ParseURL without keyspace: %+v %v", cfg, err)
	}
	for _, bad := range []string{
		"pebble:/tmp/x", "cassandra:///ks", "cassandra://h/bad-name", "cassandra://h/ks?consistency=most",
		"cassandra://h/ks?rf=0", "cassandra://h/ks?timeout=soon", "cassandra://h,,/ks",
	} {
		if _, err := ParseURL(bad); !errors.Is(err, ErrConfig) {
			t.Errorf("ParseURL(%q) = %v, want ErrConfig", bad, err)
		}
	}
}

func TestDefaults(t *testing.T) {
	c := Config{}.withDefaults()
	if c.Consistency != "LOCAL_QUORUM" || c.Keyspace != "concord" || c.DefaultBucketWidth != store.DefaultBucketWidth ||
		len(c.Hosts) != 1 || c.Narrowing.MaxBucketBytes != 100<<20 {
		t.Fatalf("defaults: %+v", c)
	}
}

func TestTableID(t *testing.T) {
	a, b := tableID("ks", "messages"), tableID("ks", "messages")
	if a != b || a == tableID("ks2", "messages") || a[14] != '5' {
		t.Fatalf("tableID not deterministic or not v5: %s %s", a, b)
	}
	got := withTableID("ks", "CREATE TABLE IF NOT EXISTS users (user_id bigint PRIMARY KEY, doc text)")
	if !strings.HasSuffix(got, " WITH ID = "+tableID("ks", "users")) {
		t.Fatalf("withTableID: %s", got)
	}
	got = withTableID("ks", "CREATE TABLE IF NOT EXISTS t (\n a int PRIMARY KEY) WITH gc_grace_seconds = 1")
	if !strings.Contains(got, ") WITH ID = "+tableID("ks", "t")+" AND gc_grace_seconds = 1") {
		t.Fatalf("withTableID with options: %s", got)
	}
	if s := "CREATE TYPE IF NOT EXISTS x (a int)"; withTableID("ks", s) != s {
		t.Fatal("withTableID changed a CREATE TYPE")
	}
}

// TestWidthsMonotonic: across narrowings, bucket numbers never decrease
// as ids grow, and never repeat across a change.
func TestWidthsMonotonic(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	from1 := snowflake.FromTime(t0.Add(17 * time.Hour))
	from2 := snowflake.FromTime(t0.Add(30 * 24 * time.Hour))
	ws := widths{{from2, 5 * time.Minute}, {from1, time.Hour}}
	def := store.DefaultBucketWidth
	prev := int64(-1)
	for d := time.Duration(0); d < 60*24*time.Hour; d += 7 * time.Minute {
		id := snowflake.FromTime(t0.Add(d))
		b := ws.bucket(id, def)
		if b < prev {
			t.Fatalf("bucket went back at %v: %d < %d", d, b, prev)
		}
		prev = b
	}
	if ws.bucket(from1-1, def) >= ws.bucket(from1, def) || ws.bucket(from2-1, def) >= ws.bucket(from2, def) {
		t.Fatal("bucket numbers shared across a width change")
	}
	if ws.widthAt(from1-1, def) != def || ws.widthAt(from1, def) != time.Hour || ws.widthAt(from2+5, def) != 5*time.Minute {
		t.Fatal("widthAt")
	}
}

func TestNarrowerPick(t *testing.T) {
	n := newNarrower(NarrowingConfig{}.withDefaults())
	const seedRate = 20 * 300.0 // the seed's busiest channel, bytes/s
	if w := n.pick(seedRate, store.DefaultBucketWidth); w != time.Hour {
		t.Fatalf("20 msg/s: %v, want 1h", w)
	}
	if w := n.pick(seedRate, time.Hour); w != 0 {
		t.Fatalf("already 1h: %v, want no change", w)
	}
	if w := n.pick(10, store.DefaultBucketWidth); w != 0 {
		t.Fatalf("quiet channel narrowed to %v", w)
	}
	if w := n.pick(1e9, time.Minute); w != 0 {
		t.Fatalf("narrowed below the narrowest width: %v", w)
	}
	if w := n.pick(1e9, store.DefaultBucketWidth); w != time.Minute {
		t.Fatalf("flood: %v, want the narrowest", w)
	}
}

func TestClampLimit(t *testing.T) {
	for in, want := range map[int]int{0: 50, -3: 1, 1: 1, 100: 100, 101: 100} {
		if got := clampLimit(in); got != want {
			t.Errorf("clampLimit(%d) = %d, want %d", in, got, want)
		}
	}
}

func TestStatementLabels(t *testing.T) {
	o := &observer{hot: newHotPartitions(4)}
	for stmt, want := range map[string][2]string{
		"SELECT " + messageCols + " FROM messages WHERE channel_id = ?":  {"messages", "select"},
		"INSERT INTO channel_buckets (channel_id, bucket) VALUES (?, ?)": {"channel_buckets", "insert"},
		"DELETE FROM usernames WHERE name = ? IF user_id = ?":            {"usernames", "delete"},
	} {
		if got := o.statementLabels(stmt); got != want {
			t.Errorf("statementLabels(%q) = %v, want %v", stmt, got, want)
		}
	}
}

func TestHotPartitions(t *testing.T) {
	h := newHotPartitions(3)
	for ch := 1; ch <= 5; ch++ {
		for range ch * 10 {
			h.add(Partition{ChannelID: snowflake.ID(ch), Bucket: 7})
		}
	}
	top := h.top(2)
	if len(top) != 2 || top[0].ChannelID != 5 || top[1].ChannelID != 4 || top[0].Reads < 50 {
		t.Fatalf("top partitions: %+v", top)
	}
}
