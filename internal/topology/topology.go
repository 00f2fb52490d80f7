// Package topology starts Concord split over processes for the test
// suites that run against `concord serve` as well as against `concord
// dev`, in the shape `make run-cluster` has: two gateway nodes and two api
// nodes behind HAProxy (one public address, as a client sees a
// deployment), two guild nodes, two data nodes (message reads and writes
// by channel, --data-nodes=ring), and on request a voice node (an SFU)
// and the live-comment roles, sharing a Cassandra keyspace and an etcd,
// talking gRPC. HAProxy balances gateway connections by least
// connections, so a client's next connection (a RESUME after a cut, say)
// may land on the other gateway node, as behind any balancer.
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
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/concord-chat/concord/internal/concordbin"
	"github.com/concord-chat/concord/internal/logbuf"
	etcdreg "github.com/concord-chat/concord/runtime/adapters/registry/etcd"
	"github.com/concord-chat/concord/runtime/adapters/store/cassandra"
	botscassandra "github.com/concord-chat/concord/runtime/domain/bots/cassandra"
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
	// FrontFlags the api and gateway nodes get besides Flags (--redis=...,
	// --rate-limits=false, say).
	FrontFlags []string
	// Voice adds a voice node: an SFU whose voice gateway serves TLS from
	// the dev CA in its data directory (VoiceCA) on a loopback port, with
	// its RTP on loopback; guild nodes find it in the registry.
	Voice bool
	// Live adds the live-comment roles: a live-api node and a live-gateway
	// node behind the balancer (/v1/... and the SSE path) and a node
	// running live-router and live-archiver. They need Kafka and Redis.
	Live bool
	// Kafka (host:port) is the event log of the live-comment roles.
	Kafka string
	// Redis (host:port) is the live-comment roles' Redis.
	Redis string
	// Verbose logs at debug level and copies every node's output to the
	// test process's stderr.
	Verbose bool
	// ReadyTimeout bounds the start of every node; 90 s when zero.
	ReadyTimeout time.Duration
	// Extra are more nodes, started after the others (read-state nodes,
	// say), not behind the balancer.
	Extra []Extra
	// FaultClock starts every `concord serve` node with
	// --fault-clock-file=<its Dir>/FaultClockFile: a fault test moves a
	// node's wall clock by writing that file (Node.SkewClock).
	FaultClock bool
}

// FaultClockFile is the name, in a node's Dir, of the file that moves its
// wall clock under Options.FaultClock (runtime/base/clock).
const FaultClockFile = "fault-clock"

// SkewClock moves the node's wall clock by d from the machine's (0 puts
// it right) through its --fault-clock-file; the node reads the file
// within 100 ms. The cluster must have been started with
// Options.FaultClock.
func (n *Node) SkewClock(d time.Duration) error {
	// Written aside and renamed: the node polls the file and must never
	// read it half written.
	file := filepath.Join(n.Dir, FaultClockFile)
	if err := os.WriteFile(file+".new", []byte(d.String()), 0o644); err != nil {
		return fmt.Errorf("skew the clock of %s: %w", n.Name, err)
	}
	if err := os.Rename(file+".new", file); err != nil {
		return fmt.Errorf("skew the clock of %s: %w", n.Name, err)
	}
	return nil
}

// Extra is one more node of Options.Extra.
type Extra struct {
	// Name is its --node; Roles its --roles.
	Name, Roles string
	// Flags it gets after the common ones and Options.Flags.
	Flags []string
}

// Node is one process of a cluster: a `concord serve` node, or HAProxy.
type Node struct {
	// Name is the node's --node (haproxy for the balancer).
	Name string
	// HTTP is its REST/gateway address (host:port); HAProxy's public one.
	HTTP string
	// Dir is its data directory.
	Dir string

	cmd  *exec.Cmd
	logs logbuf.Buffer
	done chan struct{}
}

// Output is everything the node wrote so far.
func (n *Node) Output() string { return n.logs.String() }

// Pid is the node's current process id.
func (n *Node) Pid() int { return n.cmd.Process.Pid }

// Exited is closed when the node's current process has exited.
func (n *Node) Exited() <-chan struct{} { return n.done }

// Kill kills the node's process with SIGKILL (resuming it first, should
// it be stopped) and waits until it has exited. Its data directory stays,
// for Restart.
func (n *Node) Kill() {
	_ = n.cmd.Process.Signal(syscall.SIGCONT)
	_ = n.cmd.Process.Kill()
	<-n.done
}

// Restart starts a node that has exited again with the same command line
// (address, data directory, flags) and waits until it is ready. The fault
// tests kill and restart nodes under traffic.
func (n *Node) Restart(ctx context.Context, timeout time.Duration) error {
	select {
	case <-n.done:
	default:
		return fmt.Errorf("%s: restart while running", n.Name)
	}
	cmd := exec.Command(n.cmd.Path, n.cmd.Args[1:]...)
	cmd.Stdout, cmd.Stderr = n.cmd.Stdout, n.cmd.Stderr
	n.done = make(chan struct{})
	n.cmd = cmd
	if err := cmd.Start(); err != nil {
		close(n.done)
		return fmt.Errorf("restart %s: %w", n.Name, err)
	}
	done := n.done
	go func() { _ = cmd.Wait(); close(done) }()
	return n.awaitReady(ctx, time.Now().Add(timeout))
}

// Cluster is a running topology.
type Cluster struct {
	// Front is the balancer's address (host:port), the cluster's one
	// public address: REST under /api, the gateway under /gateway (and
	// on every WebSocket upgrade), the live comments under /v1/.
	Front string
	// Nodes are the processes, in the order they started; HAProxy last.
	Nodes []*Node
	// Admin is HAProxy's admin socket.
	Admin Admin
	// Prefix is the cluster's own prefix: of its registry keys
	// (etcd://<etcd>/<Prefix>), and with Live of its live roles' Kafka
	// topics (<Prefix>.) and live prefix (<Prefix>.live.).
	Prefix string
}

// Node returns the node named name, or nil.
func (c *Cluster) Node(name string) *Node {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// VoiceCA is the PEM file of the CA the voice node's certificate comes
// from ("" without a voice node): clients that join a call trust it.
func (c *Cluster) VoiceCA() string {
	if n := c.Node("voice-1"); n != nil {
		return filepath.Join(n.Dir, "voice-ca.pem")
	}
	return ""
}

// proxyProtocol is the one switch for the PROXY protocol between HAProxy
// and the nodes behind it: with it the nodes see each client's address
// (--trusted-proxies), for the per-address connection cap, rate limits and
// bans. HAProxy's servers send-proxy-v2 (health checks too) and every node
// behind it trusts the loopback HAProxy connects from.
const proxyProtocol = true

// behindProxy are the flags of a node HAProxy forwards to.
func behindProxy(flags ...string) []string {
	if proxyProtocol {
		return append(flags, "--trusted-proxies=127.0.0.1/32")
	}
	return flags
}

// Start starts the cluster on b with a registry prefix of its own — two
// guild nodes, two data nodes, two api nodes and two gateway nodes (and
// the voice and live nodes o asks for) behind HAProxy — and returns once
// every node is ready, HAProxy sees every server up and a request
// through it reaches a guild node. On error nothing it started is left
// running; the error carries the nodes' logs.
func Start(ctx context.Context, b *Backends, o Options) (*Cluster, error) {
	bin, err := concordbin.Build()
	if err != nil {
		return nil, fmt.Errorf("build concord: %w", err)
	}
	haproxy, err := exec.LookPath("haproxy")
	if err != nil {
		return nil, errors.New("no haproxy on PATH: run `make test`, whose hack/test-deps.sh installs it")
	}
	if o.Live && (o.Kafka == "" || o.Redis == "") {
		return nil, fmt.Errorf("live roles need Kafka and Redis (Options.Kafka %q, Options.Redis %q): make test's hack/test-deps.sh starts them", o.Kafka, o.Redis)
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 90 * time.Second
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
		// Message reads and writes go to the data node owning the
		// channel, as in `make run-cluster`.
		"--data-nodes=ring",
	}, o.Flags...)
	c := &Cluster{Prefix: prefix}
	start := func(name, roles string, extra ...string) (*Node, error) {
		addr, err := ports.take()
		if err != nil {
			return nil, err
		}
		dir, err := os.MkdirTemp("", "concord-topology-"+name)
		if err != nil {
			ports.release(addr)
			return nil, err
		}
		n := &Node{Name: name, HTTP: addr, Dir: dir, done: make(chan struct{})}
		args := append([]string{"serve", "--node=" + name, "--roles=" + roles, "--http=" + addr,
			"--grpc=127.0.0.1:0", "--data-dir=" + dir}, append(common, extra...)...)
		if o.FaultClock {
			args = append(args, "--fault-clock-file="+filepath.Join(dir, FaultClockFile))
		}
		return n, c.run(n, exec.Command(bin, args...), o.Verbose)
	}
	fail := func(err error) (*Cluster, error) {
		logs := c.Logs()
		c.Close()
		return nil, fmt.Errorf("%w\n%s", err, logs)
	}
	deadline := time.Now().Add(o.ReadyTimeout)
	type spec struct {
		name, roles string
		flags       []string
	}
	specs := []spec{
		{"guild-1", "guild", nil}, {"guild-2", "guild", nil},
		{"data-1", "data", nil}, {"data-2", "data", nil},
		{"api-1", "api", behindProxy(o.FrontFlags...)}, {"api-2", "api", behindProxy(o.FrontFlags...)},
		{"gateway-1", "gateway", behindProxy(o.FrontFlags...)}, {"gateway-2", "gateway", behindProxy(o.FrontFlags...)},
	}
	if o.Voice {
		specs = append(specs, spec{"voice-1", "voice", []string{"--voice-tls=devca", "--voice-listen=127.0.0.1:0",
			"--voice-udp=127.0.0.1:0", "--voice-webrtc-udp=off"}})
	}
	var live []string
	if o.Live {
		// The live roles' topics, consumer groups and Redis keys under the
		// cluster's prefix: clusters of one run share the broker and Redis.
		live = []string{"--eventlog=kafka://" + o.Kafka + "?topic_prefix=" + prefix + ".",
			"--redis=redis://" + o.Redis, "--live-prefix=" + prefix + ".live."}
		// live-api first, alone: it creates the live tables in the
		// keyspace, and processes creating them together would race.
		specs = append([]spec{{"live-api-1", "live-api", behindProxy(live...)}}, specs...)
	}
	for i, s := range specs {
		if _, err := start(s.name, s.roles, s.flags...); err != nil {
			return fail(err)
		}
		if i == 0 && o.Live {
			if err := c.Nodes[0].awaitReady(ctx, deadline); err != nil {
				return fail(err)
			}
		}
	}
	if o.Live {
		if _, err := start("live-gateway-1", "live-gateway", behindProxy(live...)...); err != nil {
			return fail(err)
		}
		if _, err := start("live-log-1", "live-router,live-archiver", live...); err != nil {
			return fail(err)
		}
	}
	for _, e := range o.Extra {
		if _, err := start(e.Name, e.Roles, e.Flags...); err != nil {
			return fail(err)
		}
	}
	for _, n := range c.Nodes {
		if err := n.awaitReady(ctx, deadline); err != nil {
			return fail(err)
		}
	}
	if err := c.startHAProxy(haproxy, o.Verbose); err != nil {
		return fail(err)
	}
	if err := c.awaitServersUp(ctx, deadline); err != nil {
		return fail(err)
	}
	// A request without a token answered 401 went through HAProxy and an
	// api node to a guild node: the ring has one (an empty ring answers
	// 503).
	lb := c.Nodes[len(c.Nodes)-1]
	for range 2 { // both api nodes, round robin
		if err := awaitStatus(ctx, lb, "/api/v10/users/@me", http.StatusUnauthorized, deadline); err != nil {
			return fail(fmt.Errorf("the api nodes forward no request to a guild node: %w", err))
		}
	}
	return c, nil
}

// run starts cmd as node n of c, its output in n's log.
func (c *Cluster) run(n *Node, cmd *exec.Cmd, verbose bool) error {
	n.cmd = cmd
	n.cmd.Stdout, n.cmd.Stderr = &n.logs, &n.logs
	if verbose {
		n.cmd.Stderr = os.Stderr
	}
	if err := n.cmd.Start(); err != nil {
		os.RemoveAll(n.Dir)
		ports.release(n.HTTP)
		return fmt.Errorf("start %s: %w", n.Name, err)
	}
	go func() { _ = n.cmd.Wait(); close(n.done) }()
	c.Nodes = append(c.Nodes, n)
	return nil
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

// startHAProxy writes the balancer's configuration and starts it on a
// free loopback port: /gateway and every WebSocket upgrade to the gateway
// nodes (least connections), /v1/streams/{id}/live to the live gateway,
// the rest of /v1/ to the live api, everything else to the api nodes
// (round robin); every server checked on /readyz. Its admin socket takes
// runtime commands (Admin).
func (c *Cluster) startHAProxy(bin string, verbose bool) error {
	addr, err := ports.take()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "concord-topology-haproxy")
	if err != nil {
		ports.release(addr)
		return err
	}
	c.Admin.Socket = filepath.Join(dir, "admin.sock")
	servers := func(prefix string) string {
		var sb strings.Builder
		for _, n := range c.Nodes {
			if strings.HasPrefix(n.Name, prefix) {
				fmt.Fprintf(&sb, "\tserver %s %s check\n", n.Name, n.HTTP)
			}
		}
		return sb.String()
	}
	// serverOpts are the options of every server line (default-server).
	serverOpts := ""
	if proxyProtocol {
		serverOpts = " send-proxy-v2 check-send-proxy"
	}
	var cfg strings.Builder
	fmt.Fprintf(&cfg, `# Written by internal/topology.
global
	# Each connection takes two descriptors; stay within the usual 20000 limit.
	maxconn 8000
	stats socket %s mode 600 level admin

defaults
	mode http
	timeout connect 2s
	timeout client 60s
	timeout server 60s
	timeout tunnel 1h
	timeout client-fin 5s
	option forwardfor
	# A connection a server refused carried nothing to it: retry it on
	# another server at once rather than on the same one, which answers
	# 503 once that one is down (a killed node, before its checks fail).
	retries 2
	option redispatch 1

frontend public
	bind %s
	acl websocket hdr(Upgrade) -i websocket
	acl gateway_path path /gateway
	acl gateway_path path_beg /gateway/
	acl live_sse path_reg ^/v1/streams/[^/]+/live$
	acl live_api path_beg /v1/
	use_backend gateways if websocket or gateway_path
`, c.Admin.Socket, addr)
	live := c.Node("live-api-1") != nil
	if live {
		cfg.WriteString("\tuse_backend live_gateways if live_sse\n\tuse_backend live_apis if live_api\n")
	}
	// The checks: every 500 ms, every 250 ms once one failed, down after
	// three failures in a row. A check waits up to 1 s for the answer
	// (timeout check, as a Kubernetes readiness probe's default; without
	// it HAProxy waits no longer than inter, 500 ms): a
	// node that answers /readyz late is serving, and a stall of the
	// machine (a fault, a burst of load) slows every replica at once, so
	// a 500 ms bound took them all out together (session 14: no api
	// server for 3 s during a minority split that cut neither api node
	// off). A node that is gone is refused at once and down within about
	// 1 s; one that hangs (SIGSTOP) within about 4 s.
	backend := func(name, balance, prefix string) {
		fmt.Fprintf(&cfg, "\nbackend %s\n\tbalance %s\n\toption httpchk GET /readyz\n\thttp-check expect status 200\n\ttimeout check 1s\n"+
			"\tdefault-server inter 500ms fastinter 250ms fall 3 rise 1%s\n%s", name, balance, serverOpts, servers(prefix))
	}
	cfg.WriteString("\tdefault_backend apis\n")
	backend("apis", "roundrobin", "api-")
	backend("gateways", "leastconn", "gateway-")
	if live {
		backend("live_apis", "roundrobin", "live-api-")
		backend("live_gateways", "uri\n\thash-type consistent", "live-gateway-")
	}
	path := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(path, []byte(cfg.String()), 0o600); err != nil {
		ports.release(addr)
		return err
	}
	if out, err := exec.Command(bin, "-c", "-q", "-f", path).CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		ports.release(addr)
		return fmt.Errorf("haproxy rejected its configuration: %v: %s\n%s", err, out, cfg.String())
	}
	c.Front = addr
	return c.run(&Node{Name: "haproxy", HTTP: addr, Dir: dir, done: make(chan struct{})},
		exec.Command(bin, "-W", "-db", "-f", path), verbose)
}

// awaitServersUp polls HAProxy's stats until every server is UP: HAProxy
// starts its servers up and takes one down only after failed checks, so
// a server is counted once a check passed.
func (c *Cluster) awaitServersUp(ctx context.Context, deadline time.Time) error {
	lb := c.Nodes[len(c.Nodes)-1]
	for {
		states, err := c.Admin.ServerStates()
		pending := []string{}
		for name, st := range states {
			if st != "UP" {
				pending = append(pending, name+"="+st)
			}
		}
		if err == nil && len(states) > 0 && len(pending) == 0 {
			return nil
		}
		select {
		case <-lb.done:
			return errors.New("haproxy exited before its servers were up")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("haproxy: servers not up: %v (err %v)", pending, err)
		}
	}
}

// Admin is an HAProxy admin socket (stats socket ... level admin), the
// balancer's runtime API: a test steers new connections with it as an
// operator would.
type Admin struct {
	// Socket is the socket's path.
	Socket string
}

// ServerStates is the check state of every HAProxy server, by
// "backend/server": UP, DOWN, DRAIN, MAINT, or the check's progress
// (e.g. "UP 1/2"); servers never checked yet read as "no check".
func (a Admin) ServerStates() (map[string]string, error) {
	out, err := a.Command("show stat")
	if err != nil {
		return nil, err
	}
	states := map[string]string{}
	for _, f := range statRows(out) {
		st := f[17]
		if f[36] == "" || f[36] == "INI" {
			st = "no check"
		}
		states[f[0]+"/"+f[1]] = st
	}
	return states, nil
}

// Check is one HAProxy server's state and its last health check.
type Check struct {
	// Status is UP, DOWN, DRAIN, MAINT or a transition ("UP 1/3").
	Status string
	// Last is the last check's outcome (L7OK, L7TOUT a timeout, L7STS a
	// wrong status, L4CON a refused connection, ...) and Took its length.
	Last string
	Took time.Duration
}

// Checks is every HAProxy server's state and last check, by
// "backend/server".
func (a Admin) Checks() (map[string]Check, error) {
	out, err := a.Command("show stat")
	if err != nil {
		return nil, err
	}
	checks := map[string]Check{}
	for _, f := range statRows(out) {
		c := Check{Status: f[17], Last: f[36]}
		if len(f) > 38 {
			ms, _ := strconv.Atoi(f[38])
			c.Took = time.Duration(ms) * time.Millisecond
		}
		checks[f[0]+"/"+f[1]] = c
	}
	return checks, nil
}

// Conns is HAProxy's count of open connections (show stat's scur) of
// every server of backend, by server name.
func (a Admin) Conns(backend string) (map[string]int, error) {
	out, err := a.Command("show stat")
	if err != nil {
		return nil, err
	}
	n := map[string]int{}
	for _, f := range statRows(out) {
		if f[0] == backend {
			n[f[1]], _ = strconv.Atoi(f[4])
		}
	}
	return n, nil
}

// statRows are the server rows of show stat's CSV, split into fields:
// pxname, svname, ..., scur at index 4, status at 17, check_status at 36.
func statRows(out string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(line, ",")
		if len(f) < 37 || strings.HasPrefix(line, "#") || f[1] == "FRONTEND" || f[1] == "BACKEND" {
			continue
		}
		rows = append(rows, f)
	}
	return rows
}

// SetServerState sets an HAProxy server's administrative state: "ready",
// "drain" (no new connection; open ones stay) or "maint". server is
// "backend/server", e.g. "gateways/gateway-1".
func (a Admin) SetServerState(server, state string) error {
	out, err := a.Command("set server " + server + " state " + state)
	if err != nil {
		return err
	}
	if strings.TrimSpace(out) != "" {
		return fmt.Errorf("haproxy: set server %s state %s: %s", server, state, strings.TrimSpace(out))
	}
	return nil
}

// Command sends one command to the admin socket and returns HAProxy's
// answer.
func (a Admin) Command(cmd string) (string, error) {
	if a.Socket == "" {
		return "", errors.New("haproxy: no admin socket")
	}
	conn, err := net.DialTimeout("unix", a.Socket, 2*time.Second)
	if err != nil {
		return "", fmt.Errorf("haproxy admin socket: %w", err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, cmd+"\n"); err != nil {
		return "", fmt.Errorf("haproxy admin socket: %w", err)
	}
	b, err := io.ReadAll(conn)
	if err != nil {
		return "", fmt.Errorf("haproxy admin socket: %w", err)
	}
	return string(b), nil
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
		_ = os.RemoveAll(n.Dir)
		ports.release(n.HTTP)
	}
}
