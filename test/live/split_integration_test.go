//go:build integration

package live

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/concord-chat/concord/internal/concordbin"
	etcdreg "github.com/concord-chat/concord/runtime/adapters/registry/etcd"
	"github.com/concord-chat/concord/runtime/adapters/store/cassandra"
	"github.com/concord-chat/concord/runtime/domain/live/commentstore/cassandrastore"
	"github.com/concord-chat/concord/runtime/domain/live/gateway"
	"github.com/concord-chat/concord/runtime/domain/live/livetest"
	"github.com/concord-chat/concord/runtime/services/liverole"
)

// TestContractOnSplitRoles runs the live-comments contract against
// `concord serve` processes on Kafka, Redis and Cassandra with an etcd
// registry: the chat roles with live-api on one listener (it forwards GET
// .../live to a gateway found in the registry), a live-gateway, a
// live-router and a live-archiver, each its own process. Failover starts
// two more live-gateway processes and kills one with SIGKILL; the slow
// viewer case runs against a process co-locating live-api and
// live-gateway with a small viewer queue.
func TestContractOnSplitRoles(t *testing.T) {
	d := setup(t)
	chat := d.start(t, "chat", "--roles=gateway,api,guild,live-api")
	gw := d.start(t, "gw", "--roles=live-gateway")
	d.start(t, "router", "--roles=live-router")
	d.start(t, "archiver", "--roles=live-archiver")
	register := livetest.Register(chat.url)
	// The live-api finds the gateway through the registry.
	waitLive(t, chat.url, register(t))

	first := true
	livetest.Contract(t, func(t *testing.T, o livetest.Options) *livetest.Env {
		if first {
			first = false
			return livetest.Remote(t, chat.url, livetest.RemoteRoles{
				NewUser: register,
				Viewers: livetest.MetricViewers(gw.url),
				StartGateway: func(t testing.TB, _ gateway.Config) livetest.ExtraGateway {
					p := d.start(t, fmt.Sprintf("gw-extra-%d", rand.Uint32()), "--roles=live-gateway")
					return livetest.ExtraGateway{URL: p.url, Kill: p.kill}
				},
			})
		}
		// A later run with other gateway settings: live-api and
		// live-gateway in one process, the gateway's route winning.
		g := o.Gateway
		p := d.start(t, fmt.Sprintf("colocated-%d", rand.Uint32()), "--roles=live-api,live-gateway",
			fmt.Sprintf("--live-max-pending=%d", g.MaxPending), "--live-flush-interval="+g.FlushInterval.String())
		return livetest.Remote(t, p.url, livetest.RemoteRoles{NewUser: register, Viewers: livetest.MetricViewers(p.url)})
	})
	t.Run("APIKill9KeepsAcknowledged", func(t *testing.T) {
		testAPIKill9(t, d, chat.url, register)
	})
}

// testAPIKill9: comments a live-api process answered 201 for are in the
// event log (acks=all) when the process dies with SIGKILL right after:
// the archiver stores them and another live-api serves them in
// scroll-back.
func testAPIKill9(t *testing.T, d *deployment, chatURL string, register func(testing.TB) livetest.User) {
	api := d.start(t, fmt.Sprintf("api-victim-%d", rand.Uint32()), "--roles=live-api")
	creator := register(t)
	e := livetest.Remote(t, api.url, livetest.RemoteRoles{})
	s := e.CreateStream(creator, "kill the api")
	var (
		mu    sync.Mutex
		acked = map[string]livetest.Comment{}
		wg    sync.WaitGroup
	)
	enough := make(chan struct{})
	var once sync.Once
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				body := fmt.Sprintf(`{"text":"w%d-%d","video_ts_ms":%d}`, w, i, i)
				req, _ := http.NewRequest("POST", api.url+"/v1/streams/"+s.ID+"/comments", strings.NewReader(body))
				req.Header.Set("Authorization", creator.Token)
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return // the process is gone
				}
				var c livetest.Comment
				ok := resp.StatusCode == 201 && json.NewDecoder(resp.Body).Decode(&c) == nil
				resp.Body.Close()
				if !ok {
					return
				}
				mu.Lock()
				acked[c.ID] = c
				if len(acked) >= 60 {
					once.Do(func() { close(enough) })
				}
				mu.Unlock()
			}
		}()
	}
	select {
	case <-enough:
	case <-time.After(60 * time.Second):
		t.Fatal("fewer than 60 comments acknowledged in 60 s")
	}
	api.kill()
	wg.Wait()
	// Another live-api (the chat node's) serves scroll-back from the store.
	other := livetest.Remote(t, chatURL, livetest.RemoteRoles{})
	other.Eventually(30*time.Second, func() string {
		seen := map[string]bool{}
		before := ""
		for {
			q := "/v1/streams/" + s.ID + "/comments?limit=100"
			if before != "" {
				q += "&before=" + before
			}
			var page []livetest.Comment
			other.Do("GET", q, "", nil).JSON(t, &page)
			for _, c := range page {
				seen[c.ID] = true
			}
			if len(page) < 100 {
				break
			}
			before = fmt.Sprint(page[len(page)-1].Seq)
		}
		mu.Lock()
		defer mu.Unlock()
		missing := 0
		for id := range acked {
			if !seen[id] {
				missing++
			}
		}
		if missing > 0 {
			return fmt.Sprintf("%d of %d acknowledged comments missing from scroll-back", missing, len(acked))
		}
		return ""
	})
}

// waitLive waits until GET .../live through base answers 200: the
// live-api has found a live gateway in the registry.
func waitLive(t *testing.T, base string, u livetest.User) {
	t.Helper()
	e := livetest.Remote(t, base, livetest.RemoteRoles{})
	s := e.CreateStream(u, "probe")
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/streams/"+s.ID+"/live", nil)
		resp, err := http.DefaultClient.Do(req)
		code := 0
		if err == nil {
			code = resp.StatusCode
			resp.Body.Close()
		}
		cancel()
		if code == 200 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /live through the live-api = %d %v after 30 s", code, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// deployment is what every process of the test shares.
type deployment struct {
	args  []string
	redis string // --redis, for the roles that use it
}

// env reads a test server address from the first of names set; it
// fails, never skips, without one.
func env(t *testing.T, names ...string) string {
	t.Helper()
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	t.Fatalf("%v not set: run `make test-deps` and source ~/.cache/concord/test-env.sh", names)
	return ""
}

// setup starts an embedded etcd, creates a Cassandra keyspace with the
// chat and live-comment schemas, and builds the binary.
func setup(t *testing.T) *deployment {
	t.Helper()
	ctx := context.Background()
	kafka, redis, cass := env(t, "CONCORD_KAFKA"), env(t, "CONCORD_REDIS", "CONCORD_TEST_REDIS"), env(t, "CONCORD_CASSANDRA")
	bin := make(chan struct{})
	go func() { defer close(bin); concordbin.Build() }()
	stopEtcd, endpoint, err := etcdreg.StartEmbedded(ctx, t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stopEtcd)
	run := fmt.Sprintf("%d%04x", time.Now().UnixNano()%1e9, rand.Uint32()&0xffff)
	ks := "concord_live_" + run
	t.Cleanup(func() { dropKeyspace(t, cass, ks) })
	st, err := cassandra.New(ctx, cassandra.Config{Hosts: []string{cass}, Keyspace: ks, ReplicationFactor: 1, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("create keyspace: %v", err)
	}
	if _, err := cassandrastore.New(ctx, st); err != nil {
		t.Fatalf("live schema: %v", err)
	}
	st.Close()
	<-bin
	concordbin.Path(t)
	return &deployment{args: []string{
		"--registry=etcd://" + strings.TrimPrefix(endpoint, "http://"),
		"--store=cassandra://" + cass + "/" + ks + "?rf=1",
		"--eventlog=kafka://" + kafka + "?partitions=4",
		"--server-key=" + fmt.Sprintf("%064x", rand.Uint64()),
		"--live-prefix=t" + run + ".",
		"--rate-limits=false",
		"--lease-ttl=3s",
		// The suite's gateway settings (livetest.TestOptions).
		"--live-ping-interval=300ms",
		"--live-report-interval=200ms",
	}, redis: "--redis=redis://" + strings.TrimPrefix(redis, "redis://")}
}

func dropKeyspace(t *testing.T, addr, ks string) {
	c := gocql.NewCluster(addr)
	c.Timeout = time.Minute
	s, err := c.CreateSession()
	if err != nil {
		t.Errorf("drop keyspace %s: %v", ks, err)
		return
	}
	defer s.Close()
	if err := s.Query(`DROP KEYSPACE IF EXISTS ` + ks).Exec(); err != nil {
		t.Errorf("drop keyspace %s: %v", ks, err)
	}
}

// start runs `concord serve` named name with the deployment's flags and
// extra, and waits until its /readyz answers 200.
func (d *deployment) start(t testing.TB, name string, extra ...string) *proc {
	t.Helper()
	args := append(append([]string{}, d.args...), extra...)
	if needsRedis(extra) { // a node refuses a --redis none of its roles uses
		args = append(args, d.redis)
	}
	p := startProc(t, name, args...)
	p.waitReady(t)
	return p
}

// needsRedis reports whether the --roles among args name a role that
// runs on --redis.
func needsRedis(args []string) bool {
	for _, a := range args {
		if rs, ok := strings.CutPrefix(a, "--roles="); ok {
			return slices.ContainsFunc(strings.Split(rs, ","), func(r string) bool {
				return liverole.UsesRedis(r) || r == "gateway" || r == "api"
			})
		}
	}
	return false
}
