//go:build faults

package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/concord-chat/concord/runtime/adapters/eventlog/kafka"
	"github.com/concord-chat/concord/runtime/adapters/store/cassandra"
	readstatecassandra "github.com/concord-chat/concord/runtime/domain/readstate/cassandra"
)

// replicated are the addresses hack/replicated.sh wrote to its env file.
type replicated struct {
	cassandra, kafka []string
	dir, script      string
}

// needReplicated fails the test, saying how to start them, unless the
// replicated stores' addresses are in the environment.
func needReplicated(t *testing.T) replicated {
	t.Helper()
	r := replicated{
		cassandra: splitList(os.Getenv("CONCORD_REPL_CASSANDRA")),
		kafka:     splitList(os.Getenv("CONCORD_REPL_KAFKA")),
		dir:       os.Getenv("CONCORD_REPL_DIR"),
		script:    os.Getenv("CONCORD_REPL_SCRIPT"),
	}
	if len(r.cassandra) != 3 || len(r.kafka) != 3 || r.dir == "" || r.script == "" {
		t.Fatal("no replicated Cassandra and Kafka: run `bash hack/replicated.sh start && . ~/.cache/concord/replicated/env.sh` " +
			"(make test-faults does), which sets CONCORD_REPL_CASSANDRA, CONCORD_REPL_KAFKA, CONCORD_REPL_DIR and CONCORD_REPL_SCRIPT")
	}
	return r
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func freshKeyspace(prefix string) string {
	return fmt.Sprintf("%s_%d_%06x", prefix, time.Now().Unix(), rand.Uint32()&0xffffff)
}

// keyspaceRF is the replication factor of keyspace ks, read from the
// schema of the ring at hosts.
func keyspaceRF(t *testing.T, hosts []string, ks string) string {
	t.Helper()
	c := gocql.NewCluster(hosts...)
	c.Timeout = 20 * time.Second
	s, err := c.CreateSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var repl map[string]string
	if err := s.Query(`SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = ?`, ks).
		Consistency(gocql.One).Scan(&repl); err != nil {
		t.Fatalf("keyspace %s: %v", ks, err)
	}
	return repl["replication_factor"]
}

// TestStoreKeyspaceIsReplicated: a keyspace Concord's store creates on
// the three-node ring without rf= in its URL has three replicas (its
// reads and writes run at LOCAL_QUORUM, two of them, by default).
func TestStoreKeyspaceIsReplicated(t *testing.T) {
	r := needReplicated(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ks := freshKeyspace("concord_faults_rf")
	cfg, err := cassandra.ParseURL("cassandra://" + strings.Join(r.cassandra, ",") + "/" + ks)
	if err != nil {
		t.Fatal(err)
	}
	st, err := cassandra.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if rf := keyspaceRF(t, r.cassandra, ks); rf != "3" {
		t.Fatalf("keyspace %s: replication_factor %s, want 3", ks, rf)
	}
}

// TestReadStateKeyspaceIsReplicated: the read-state table's store, which
// shares the keyspace and may create it first, creates it with three
// replicas on a three-node ring. (It created it with one: a read-state
// node starting before any other on a fresh keyspace left every table of
// it unreplicated.)
func TestReadStateKeyspaceIsReplicated(t *testing.T) {
	r := needReplicated(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ks := freshKeyspace("concord_faults_rsrf")
	st, err := readstatecassandra.New(ctx, readstatecassandra.Config{Hosts: r.cassandra, Keyspace: ks})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if rf := keyspaceRF(t, r.cassandra, ks); rf != "3" {
		t.Fatalf("keyspace %s created by the read-state store: replication_factor %s, want 3", ks, rf)
	}
}

// TestEventLogTopicsAreReplicated: a topic Concord's Kafka event log
// creates on the three brokers, with no replication= in its URL, has
// three replicas (the brokers' default.replication.factor), so one
// broker's loss loses no acknowledged record. (It had one.)
func TestEventLogTopicsAreReplicated(t *testing.T) {
	r := needReplicated(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cfg, err := kafka.ParseURL("kafka://" + strings.Join(r.kafka, ",") + "?topic_prefix=" + freshKeyspace("faults") + ".")
	if err != nil {
		t.Fatal(err)
	}
	l, err := kafka.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.EnsureTopic(ctx, "rf", 2); err != nil {
		t.Fatal(err)
	}
	sc := sarama.NewConfig()
	sc.Version = sarama.V4_0_0_0
	admin, err := sarama.NewClusterAdmin(r.kafka, sc)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	// EnsureTopic waited for the topic on the broker its own admin asks;
	// the broker this admin asks may learn of it a moment later (metadata
	// spreads from the controller), and until then answers
	// UNKNOWN_TOPIC_OR_PARTITION. Wait for that broker to know it.
	var md []*sarama.TopicMetadata
	for backoff := 20 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		md, err = admin.DescribeTopics([]string{cfg.TopicPrefix + "rf"})
		if err == nil && len(md) == 1 && md[0].Err == sarama.ErrNoError && len(md[0].Partitions) > 0 {
			break
		}
		select {
		case <-ctx.Done():
			if err == nil && len(md) == 1 {
				err = md[0].Err
			}
			t.Fatalf("describe topic %s: %v (%v)", cfg.TopicPrefix+"rf", err, ctx.Err())
		case <-time.After(backoff):
		}
	}
	for _, p := range md[0].Partitions {
		if len(p.Replicas) != 3 {
			t.Fatalf("topic %s partition %d: replicas %v, want 3", md[0].Name, p.ID, p.Replicas)
		}
	}
}
