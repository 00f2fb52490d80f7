//go:build integration

package live

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	etcdreg "github.com/concord-chat/concord/runtime/adapters/registry/etcd"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live"
	"github.com/concord-chat/concord/runtime/domain/live/commentstore"
	"github.com/concord-chat/concord/runtime/domain/live/livetest"
)

// TestArchiverShardsSampledStream runs `concord serve --roles=live-archiver`
// on Kafka, Cassandra and etcd: while a stream carries the routers' sampled
// mark in etcd (live/sampled/<id>, put here as a router would), the
// archiver writes its comments over 16 store shards (each comment's shard,
// read back from Cassandra, is commentstore.Shard of its id, and 32
// comments posted one after another land on at least 8 of them: with id
// mod 16 they all landed on shard 0), and scroll-back lists them. No
// router runs, so nothing clears the mark.
func TestArchiverShardsSampledStream(t *testing.T) {
	d := setup(t)
	chat := d.start(t, "chat", "--roles=gateway,api,guild,live-api")
	d.start(t, "archiver", "--roles=live-archiver")
	register := livetest.Register(chat.url)
	e := livetest.Remote(t, chat.url, livetest.RemoteRoles{NewUser: register})
	alice := e.NewUser()
	s := e.CreateStream(alice, "hot")
	sid, err := snowflake.Parse(s.ID)
	if err != nil {
		t.Fatal(err)
	}

	var endpoint, store string
	for _, a := range d.args {
		if v, ok := strings.CutPrefix(a, "--registry=etcd://"); ok {
			endpoint = v
		}
		if v, ok := strings.CutPrefix(a, "--store=cassandra://"); ok {
			store = v
		}
	}
	ctx := context.Background()
	reg, err := etcdreg.New(etcdreg.Config{Endpoints: []string{endpoint}})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	if err := reg.Put(ctx, live.SampledKey(sid), []byte(`{"state":"live","sampled":true}`), registry.Persistent); err != nil {
		t.Fatal(err)
	}

	var posted []livetest.Comment
	for i := range 32 {
		posted = append(posted, e.Post(e.NewUser(), s.ID, fmt.Sprintf("hot take number %d", i), int64(i)*100))
	}
	host, rest, _ := strings.Cut(store, "/")
	ks, _, _ := strings.Cut(rest, "?")
	c := gocql.NewCluster(host)
	c.Keyspace, c.Timeout = ks, 30*time.Second
	sess, err := c.CreateSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	shards := map[int]int{}
	deadline := time.Now().Add(30 * time.Second)
	for _, p := range posted {
		id, _ := snowflake.Parse(p.ID)
		var shard int
		for {
			err := sess.Query(`SELECT shard FROM live_comment_ids WHERE stream_id = ? AND comment_id = ?`, int64(sid), int64(id)).Scan(&shard)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("comment %s not archived after 30 s: %v", p.ID, err)
			}
			time.Sleep(100 * time.Millisecond) // polling Cassandra: the archiver signals nothing
		}
		if want := commentstore.Shard(id, live.SampledShards); shard != want {
			t.Fatalf("comment %s in shard %d, want %d (of %d)", p.ID, shard, want, live.SampledShards)
		}
		shards[shard]++
	}
	if len(shards) < 8 {
		t.Fatalf("32 comments of a sampled stream over %d shards: %v", len(shards), shards)
	}
	r := e.Do("GET", "/v1/streams/"+s.ID+"/comments?limit=100", alice.Token, nil)
	if !strings.Contains(string(r.Body), posted[0].ID) || !strings.Contains(string(r.Body), posted[31].ID) {
		t.Fatalf("scroll-back = %d %.300s", r.Status, r.Body)
	}
	t.Logf("32 comments over %d shards: %v", len(shards), shards)
}
