//go:build integration

package guild

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/adapters/store/cassandra"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// TestLedgerOnCassandra: the ledger of writes in doubt keeps its rows in
// Cassandra's message table under an id with the top bit set (a negative
// bigint there): recorded, read back whole, dropped, and never listed as
// a message of the channel itself.
func TestLedgerOnCassandra(t *testing.T) {
	addr := os.Getenv("CONCORD_CASSANDRA")
	if addr == "" {
		t.Fatal("CONCORD_CASSANDRA is not set: run `make test`, or source ~/.cache/concord/test-env.sh")
	}
	ks := fmt.Sprintf("concord_ledger_%08x", rand.Uint32())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cs, err := cassandra.New(ctx, cassandra.Config{Hosts: []string{addr}, Keyspace: ks, ReplicationFactor: 1, Timeout: time.Minute, NumConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		c := gocql.NewCluster(addr)
		c.Timeout = time.Minute
		if sess, err := c.CreateSession(); err == nil {
			_ = sess.Query(`DROP KEYSPACE IF EXISTS ` + ks).Exec()
			sess.Close()
		}
	})
	ids, err := snowflake.New(snowflake.Config{})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := NewService(Config{}, Deps{Store: cs, Sink: newRecordingSink(), IDs: ids})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	next := func() snowflake.ID {
		id, err := ids.Next()
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	guildID, channelID, msgID := next(), next(), next()
	rec := doubtRecord{Type: eventlog.MessageCreate, Wire: []byte(`{"id":"1","content":"a"}`),
		Message: store.Message{ID: msgID, ChannelID: channelID, GuildID: guildID, AuthorID: next(), Content: "a", Mentions: []snowflake.ID{}}}
	if err := svc.putDoubt(ctx, guildID, rec); err != nil {
		t.Fatal(err)
	}
	got, err := svc.doubts(ctx, guildID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Message.ID != msgID || got[0].Message.ChannelID != channelID || got[0].Message.Content != "a" ||
		got[0].Type != rec.Type || string(got[0].Wire) != string(rec.Wire) {
		t.Fatalf("ledger read back %+v, want %+v", got, rec)
	}
	if ms, err := cs.ListMessages(ctx, channelID, store.HistoryQuery{Limit: 10}); err != nil || len(ms) != 0 {
		t.Fatalf("the channel itself lists %v (%v): the ledger leaked into it", ms, err)
	}
	if err := svc.dropDoubts(ctx, guildID, []snowflake.ID{msgID}); err != nil {
		t.Fatal(err)
	}
	if got, err := svc.doubts(ctx, guildID); err != nil || len(got) != 0 {
		t.Fatalf("ledger after the drop: %v (%v), want empty", got, err)
	}
}
