// Package topology starts Concord split over processes for the test
// suites that run against `concord serve` as well as against `concord
// dev`: one front node (--roles=api,gateway: the REST endpoint and the
// gateway on one address, as a load balancer would show them) and two
// guild nodes, sharing a Cassandra keyspace and an etcd, talking gRPC.
//
// The backends (an embedded etcd in the test process and one keyspace
// with the bot tables created up front) are started once per test process
// and shared; each cluster gets a registry prefix of its own, so clusters
// of one run never see each other's nodes.
package topology

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/concord-chat/concord/internal/concordbin"
	"github.com/concord-chat/concord/internal/logbuf"
	botscassandra "github.com/concord-chat/concord/runtime/bots/cassandra"
	etcdreg "github.com/concord-chat/concord/runtime/registry/etcd"
	"github.com/concord-chat/concord/runtime/store/cassandra"
)

// Backends are the etcd and the keyspace the clusters of one test
// process share.
type Backends struct {
	// Etcd is the embedded etcd's host:port.
	Etcd string
	// Store is the --store URL of the keyspace.
	Store string
	// Key is the --server-key every node of every cluster uses.
	Key string

	stop func()
	dir  string
}

// StartBackends starts an embedded etcd and creates a fresh keyspace
// (with the bot tables: nodes starting together would otherwise race
// their schema changes, which Cassandra serializes slowly) on the
// Cassandra at cass (host:port). It starts building the concord binary
// in the background too.
func StartBackends(ctx context.Context, cass, keyspacePrefix string) (*Backends, error) {
	if cass == "" {
		return nil, errors.New("no Cassandra address: run `make test`, whose hack/test-deps.sh starts Cassandra and sets CONCORD_CASSANDRA")
	}
	go func() { _, _ = concordbin.Build() }()
	dir, err := os.MkdirTemp("", "concord-topology-etcd")
	if err != nil {
		return nil, err
	}
	stop, ep, err := etcdreg.StartEmbedded(context.Background(), dir, "")
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("embedded etcd: %w", err)
	}
	b := &Backends{stop: stop, dir: dir, Etcd: strings.TrimPrefix(ep, "http://")}
	ks := fmt.Sprintf("%s_%d_%06x", keyspacePrefix, time.Now().Unix(), rand.Uint32()&0xffffff)
	st, err := cassandra.New(ctx, cassandra.Config{Hosts: []string{cass}, Keyspace: ks, ReplicationFactor: 1})
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("create keyspace %s: %w", ks, err)
	}
	defer st.Close()
	bt, err := botscassandra.New(ctx, botscassandra.Config{}, st)
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("bot tables in %s: %w", ks, err)
	}
	bt.Close()
	b.Store = "cassandra://" + cass + "/" + ks + "?rf=1"
	b.Key = fmt.Sprintf("%064x", rand.Uint64())
	return b, nil
}

// Close stops the etcd and removes its data directory. The keyspace
// stays: Cassandra drops keyspaces slowly, and each run makes a new one.
func (b *Backends) Close() {
	if b.stop != nil {
		b.stop()
	}
	if b.dir != "" {
		_ = os.RemoveAll(b.dir)
	}
}

// Options change the nodes a cluster starts.
type Options struct {
	// Flags every node gets after the common ones (a later flag of the
	// same name wins).
	Flags []string
	// FrontFlags the front node gets besides Flags (--redis=..., say).
	FrontFlags []string
	// Verbose logs at debug level and copies every node's output to the
	// test process's stderr.
	Verbose bool
	// ReadyTimeout bounds the start of every node; 60 s when zero.
	ReadyTimeout time.Duration
}

// Node is one `concord serve` process of a cluster.
type Node struct {
	// Name is the node's --node.
	Name string
	// HTTP is its REST/gateway address (host:port).
	HTTP string

	cmd  *exec.Cmd
	dir  string
	logs logbuf.Buffer
	done chan struct{}
}

// Output is everything the node wrote so far.
func (n *Node) Output() string { return n.logs.String() }

// Cluster is a running topology.
type Cluster struct {
	// Front is the front node's address (host:port): REST under /api and
	// the gateway under /gateway.
	Front string
	// Nodes are the processes, guild nodes first, the front node last.
	Nodes []*Node
}

// Start starts two guild nodes and a front node on b with a registry
// prefix of their own and returns once every node is ready and the front
// node forwards to a guild node. On error nothing it started is left
// running; the error carries the nodes' logs.
func Start(ctx context.Context, b *Backends, o Options) (*Cluster, error) {
	bin, err := concordbin.Build()
	if err != nil {
		return nil, fmt.Errorf("build concord: %w", err)
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 60 * time.Second
	}
	level := "warn"
	if o.Verbose {
		level = "debug"
	}
	prefix := fmt.Sprintf("topo-%d-%06x", time.Now().UnixNano(), rand.Uint32()&0xffffff)
	common := append([]string{
		"--registry=etcd://" + b.Etcd + "/" + prefix,
		"--store=" + b.Store,
		"--server-key=" + b.Key,
		"--lease-ttl=2s",
		"--retry-interval=500ms",
		"--log-level=" + level,
	}, o.Flags...)
	c := &Cluster{}
	start := func(name, roles string, extra ...string) error {
		addr, err := freeLoopback()
		if err != nil {
			return err
		}
		dir, err := os.MkdirTemp("", "concord-topology-"+name)
		if err != nil {
			return err
		}
		n := &Node{Name: name, HTTP: addr, dir: dir, done: make(chan struct{})}
		args := append([]string{"serve", "--node=" + name, "--roles=" + roles, "--http=" + addr,
			"--grpc=127.0.0.1:0", "--data-dir=" + dir}, append(common, extra...)...)
		n.cmd = exec.Command(bin, args...)
		n.cmd.Stdout, n.cmd.Stderr = &n.logs, &n.logs
		if o.Verbose {
			n.cmd.Stderr = os.Stderr
		}
		if err := n.cmd.Start(); err != nil {
			os.RemoveAll(dir)
			return fmt.Errorf("start %s: %w", name, err)
		}
		go func() { _ = n.cmd.Wait(); close(n.done) }()
		c.Nodes = append(c.Nodes, n)
		return nil
	}
	fail := func(err error) (*Cluster, error) {
		logs := c.Logs()
		c.Close()
		return nil, fmt.Errorf("%w\n%s", err, logs)
	}
	for _, s := range []struct{ name, roles string }{{"guild-1", "guild"}, {"guild-2", "guild"}} {
		if err := start(s.name, s.roles); err != nil {
			return fail(err)
		}
	}
	if err := start("front", "api,gateway", o.FrontFlags...); err != nil {
		return fail(err)
	}
	front := c.Nodes[len(c.Nodes)-1]
	c.Front = front.HTTP
	deadline := time.Now().Add(o.ReadyTimeout)
	for _, n := range c.Nodes {
		if err := n.awaitReady(ctx, deadline); err != nil {
			return fail(err)
		}
	}
	// A request without a token answered 401 went through the front node
	// to a guild node: the ring has one (an empty ring answers 503).
	if err := awaitStatus(ctx, front, "/api/v10/users/@me", http.StatusUnauthorized, deadline); err != nil {
		return fail(fmt.Errorf("front node forwards no request to a guild node: %w", err))
	}
	return c, nil
}

func (n *Node) awaitReady(ctx context.Context, deadline time.Time) error {
	return awaitStatus(ctx, n, "/readyz", http.StatusOK, deadline)
}

// awaitStatus polls path on n until it answers status: a process
// starting up has no event to await but its listener.
func awaitStatus(ctx context.Context, n *Node, path string, status int, deadline time.Time) error {
	for {
		resp, err := http.Get("http://" + n.HTTP + path)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == status {
				return nil
			}
		}
		select {
		case <-n.done:
			return fmt.Errorf("%s exited before it was ready", n.Name)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %s did not answer %d on %s", n.Name, path, status, n.HTTP)
		}
	}
}

// Logs is every node's output, each under its name.
func (c *Cluster) Logs() string {
	var sb strings.Builder
	for _, n := range c.Nodes {
		fmt.Fprintf(&sb, "--- %s logs:\n%s\n", n.Name, n.Output())
	}
	return sb.String()
}

// Close stops every node (SIGTERM, then SIGKILL after 15 s) and removes
// their data directories.
func (c *Cluster) Close() {
	for _, n := range c.Nodes {
		_ = n.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, n := range c.Nodes {
		select {
		case <-n.done:
		case <-time.After(15 * time.Second):
			_ = n.cmd.Process.Kill()
			<-n.done
		}
		_ = os.RemoveAll(n.dir)
	}
}

// freeLoopback returns a loopback address nobody listens on right now.
func freeLoopback() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
