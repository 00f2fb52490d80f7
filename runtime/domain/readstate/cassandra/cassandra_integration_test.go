//go:build integration

package cassandra_test

import (
	"context"
	"os"
	"testing"

	chatstore "github.com/concord-chat/concord/runtime/adapters/store/cassandra"
	"github.com/concord-chat/concord/runtime/domain/readstate"
	"github.com/concord-chat/concord/runtime/domain/readstate/cassandra"
	"github.com/concord-chat/concord/runtime/domain/readstate/storetest"
)

// The suite needs a real Cassandra named by CONCORD_CASSANDRA=host:port;
// `make test` starts one with hack/cassandra/start.sh. Every case works on
// fresh ids in one keyspace, so reruns share it.
func TestConformance(t *testing.T) {
	addr := os.Getenv("CONCORD_CASSANDRA")
	if addr == "" {
		t.Fatal("CONCORD_CASSANDRA is not set: run `make test`, or " +
			"`export CONCORD_CASSANDRA=\"$(hack/cassandra/start.sh)\"` before go test -tags integration")
	}
	s, err := cassandra.New(context.Background(), cassandra.Config{Hosts: []string{addr}, Keyspace: "concord_readstate_it"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.Run(t, func(testing.TB) readstate.Store { return s })
}

// TestConformanceShared: the store on the chat store's session
// (NewShared, one Cassandra session per process) passes the same suite,
// and closing it leaves the session to its owner.
func TestConformanceShared(t *testing.T) {
	addr := os.Getenv("CONCORD_CASSANDRA")
	if addr == "" {
		t.Fatal("CONCORD_CASSANDRA is not set: run `make test`, or " +
			"`export CONCORD_CASSANDRA=\"$(hack/cassandra/start.sh)\"` before go test -tags integration")
	}
	ctx := context.Background()
	chat, err := chatstore.Connect(ctx, chatstore.Config{Hosts: []string{addr}, Keyspace: "concord_readstate_shared_it"})
	if err != nil {
		t.Fatal(err)
	}
	defer chat.Close()
	s, err := cassandra.NewShared(ctx, cassandra.Config{Keyspace: chat.Keyspace()}, chat.Session())
	if err != nil {
		t.Fatal(err)
	}
	storetest.Run(t, func(testing.TB) readstate.Store { return s })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := chat.Session().Query(`SELECT now() FROM system.local`).ExecContext(ctx); err != nil {
		t.Fatalf("the chat store's session after the read-state store closed: %v", err)
	}
}
