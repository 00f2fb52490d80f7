//go:build integration

package migrate

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/concord-chat/concord/runtime/adapters/store/cassandra"
)

// TestPebbleToCassandra copies a Pebble store's history into Cassandra,
// resumes after an interruption and verifies by sampled reads:
//
//	export CONCORD_CASSANDRA="$(hack/cassandra/start.sh)"
//	go test -tags integration -run PebbleToCassandra ./runtime/adapters/migrate/
func TestPebbleToCassandra(t *testing.T) {
	addr := os.Getenv("CONCORD_CASSANDRA")
	if addr == "" {
		t.Fatal("CONCORD_CASSANDRA is not set: run `make test`, or " +
			"`export CONCORD_CASSANDRA=\"$(hack/cassandra/start.sh)\"` first")
	}
	ks := fmt.Sprintf("concord_migrate_%08x", rand.Uint32())
	t.Cleanup(func() {
		c := gocql.NewCluster(addr)
		c.Timeout = time.Minute
		if s, err := c.CreateSession(); err == nil {
			s.Query(`DROP KEYSPACE IF EXISTS ` + ks).Exec()
			s.Close()
		}
	})
	ctx := context.Background()
	cfg := cassandra.Config{Hosts: []string{addr}, Keyspace: ks, ReplicationFactor: 1, Timeout: time.Minute}
	cfg.Narrowing.Disabled = true
	dst, err := cassandra.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()

	src, total := fill(t, 60)
	cpFile := t.TempDir() + "/cp.json"
	failing := &failingDest{Messages: dst, limit: int64(total / 3)}
	if _, err := Run(ctx, Config{From: src, To: failing, Ranges: 8, Workers: 4, Checkpoint: cpFile}); err == nil {
		t.Fatal("interrupted run did not fail")
	}
	start := time.Now()
	rep, err := Run(ctx, Config{From: src, To: dst, Ranges: 8, Workers: 4, Checkpoint: cpFile, Progress: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("resumed copy: %d channels, %d messages in %v (%d messages in total)",
		rep.Channels, rep.Messages, time.Since(start).Round(time.Millisecond), total)
	assertCopied(t, src, dst)
	vr, err := Verify(ctx, VerifyConfig{From: src, To: dst, Samples: 30})
	if err != nil || !vr.OK() {
		t.Fatalf("Verify: %+v %v", vr, err)
	}
	t.Logf("verified %d channels, %d reads, %d messages", vr.Channels, vr.Reads, vr.Messages)
}
