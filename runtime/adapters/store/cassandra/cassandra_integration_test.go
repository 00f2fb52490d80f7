//go:build integration

package cassandra_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/adapters/store/cassandra"
	"github.com/concord-chat/concord/runtime/adapters/store/storetest"
)

// These tests need a real Cassandra (or ScyllaDB) named by
// CONCORD_CASSANDRA=host:port. `make test` starts one with
// hack/cassandra/start.sh; by hand:
//
//	export CONCORD_CASSANDRA="$(hack/cassandra/start.sh)"
//	go test -tags integration ./runtime/adapters/store/cassandra/

// server returns the address of the test server or fails the test.
func server(t testing.TB) string {
	t.Helper()
	addr := os.Getenv("CONCORD_CASSANDRA")
	if addr == "" {
		t.Fatal("CONCORD_CASSANDRA is not set: run `make test`, or " +
			"`export CONCORD_CASSANDRA=\"$(hack/cassandra/start.sh)\"` before go test -tags integration")
	}
	return addr
}

// testKeyspace creates a fresh keyspace name and drops the keyspace when
// the test ends.
func testKeyspace(t testing.TB, addr string) string {
	ks := fmt.Sprintf("concord_test_%d_%08x", time.Now().Unix(), rand.Uint32())
	t.Cleanup(func() {
		if err := dropKeyspace(addr, ks); err != nil {
			t.Error(err)
		}
	})
	return ks
}

// The package's tests share one keyspace (schema changes are the slow
// part of a test on a small machine), created by the first test that
// asks and dropped by TestMain. Every test works on fresh random ids.
var shared struct {
	once sync.Once
	addr string
	ks   string
}

func sharedKeyspace(t testing.TB, addr string) string {
	shared.once.Do(func() {
		shared.addr = addr
		shared.ks = fmt.Sprintf("concord_test_%d_%08x", time.Now().Unix(), rand.Uint32())
	})
	return shared.ks
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.ks != "" {
		if err := dropKeyspace(shared.addr, shared.ks); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

func dropKeyspace(addr, ks string) error {
	cluster := gocql.NewCluster(addr)
	cluster.Timeout = time.Minute
	s, err := cluster.CreateSession()
	if err != nil {
		return fmt.Errorf("drop keyspace %s: %w", ks, err)
	}
	defer s.Close()
	if err := s.Query(`DROP KEYSPACE IF EXISTS ` + ks).Exec(); err != nil {
		return fmt.Errorf("drop keyspace %s: %w", ks, err)
	}
	return nil
}

func testConfig(addr, ks string) cassandra.Config {
	return cassandra.Config{
		Hosts:             []string{addr},
		Keyspace:          ks,
		ReplicationFactor: 1,
		Timeout:           30 * time.Second,
	}
}

func newTestStore(t testing.TB, cfg cassandra.Config) *cassandra.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := cassandra.New(ctx, cfg)
	if err != nil {
		t.Fatalf("cassandra.New: %v", err)
	}
	return s
}

// TestConformance runs the storage conformance suite, unchanged, against
// the server. Every group gets its own store on one shared keyspace.
func TestConformance(t *testing.T) {
	addr := server(t)
	cfg := testConfig(addr, sharedKeyspace(t, addr))
	storetest.Run(t, func(t *testing.T) store.Store { return newTestStore(t, cfg) })
}

// TestConcurrentMigrations starts many stores on a fresh keyspace at once:
// all must succeed and every migration must be recorded once.
func TestConcurrentMigrations(t *testing.T) {
	addr := server(t)
	cfg := testConfig(addr, testKeyspace(t, addr))
	const n = 6
	var wg sync.WaitGroup
	errs := make(chan error, n)
	stores := make(chan *cassandra.Store, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			s, err := cassandra.New(ctx, cfg)
			if err != nil {
				errs <- err
				return
			}
			stores <- s
		}()
	}
	wg.Wait()
	close(errs)
	close(stores)
	for err := range errs {
		t.Errorf("concurrent New: %v", err)
	}
	for s := range stores {
		s.Close()
	}
	cluster := gocql.NewCluster(addr)
	cluster.Keyspace = cfg.Keyspace
	sess, err := cluster.CreateSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	iter := sess.Query(`SELECT version FROM schema_migrations`).Iter()
	seen := map[int]int{}
	var v int
	for iter.Scan(&v) {
		seen[v]++
	}
	if err := iter.Close(); err != nil {
		t.Fatal(err)
	}
	for ver := 1; ver <= cassandra.SchemaVersion(); ver++ {
		if seen[ver] != 1 {
			t.Errorf("migration %d recorded %d times", ver, seen[ver])
		}
	}
	if seen[-1] != 0 {
		t.Errorf("migration lock still held")
	}
	// A second start on a migrated keyspace changes nothing.
	s := newTestStore(t, cfg)
	s.Close()
}

// TestUnavailable: a store whose server is unreachable fails with
// store.ErrUnavailable, and Connect keeps retrying until its context ends.
func TestUnavailable(t *testing.T) {
	cfg := cassandra.Config{Hosts: []string{"127.0.0.1:1"}, ConnectTimeout: time.Second, Keyspace: "nowhere"}
	_, err := cassandra.New(context.Background(), cfg)
	if err == nil || !errorsIs(err, store.ErrUnavailable) {
		t.Fatalf("New against a closed port: %v, want store.ErrUnavailable", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = cassandra.Connect(ctx, cfg)
	if err == nil || !errorsIs(err, context.DeadlineExceeded) {
		t.Fatalf("Connect: %v, want the context's deadline", err)
	}
}
