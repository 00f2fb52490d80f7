//go:build integration

package cassandra_test

import (
	"context"
	"os"
	"testing"

	"github.com/concord-chat/concord/runtime/readstate"
	"github.com/concord-chat/concord/runtime/readstate/cassandra"
	"github.com/concord-chat/concord/runtime/readstate/storetest"
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
