// Package tree is the relay tree of the live path: per-stream topics
// sharded across relay nodes (a stream's owner is chosen by rendezvous
// hashing of its id over the nodes), which the router publishes to and
// gateways subscribe through. The owner copies each message to at most
// OwnerFanout direct subscribers; past that it redirects new subscribers
// to a child relay (another node, which subscribes to the owner once and
// feeds up to ChildFanout subscribers), and a full child redirects to a
// child of its own, so the tree deepens with the logarithm of the
// audience. Delivery is fire and forget: a message lost on a dead relay
// shows as a jump in the stream's seqs (Batch.Prev) at the gateway, which
// refills from the recent cache; the subscription itself re-forms
// through the owner, which places it on a live sibling, within a second
// or two. Nothing durable lives on a relay.
//
// Wire: POST /v1/relay/{stream} publishes its body (the owner answers
// with X-Relay-Copies, its direct copies); GET /v1/relay/{stream}
// subscribes, answered with a stream of frames (4-byte big-endian length,
// then the message), or 307 to the relay to use instead.
package tree

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Fan-outs of the tree.
const (
	// OwnerFanout is how many subscribers a stream's owner feeds itself
	// before it grows a second tier.
	OwnerFanout = 50
	// ChildFanout is how many subscribers a relay below the owner feeds
	// before it grows another tier below itself.
	ChildFanout = 15
	// queueLimit bounds one subscriber's undelivered messages; past it
	// the subscriber loses messages (and sees the seq gap).
	queueLimit = 1024
	// maxMessage bounds a frame.
	maxMessage = 8 << 20
)

// Owner returns the node of nodes that owns stream (rendezvous hashing),
// skipping those in down; "" when none is left.
func Owner(stream snowflake.ID, nodes []string, down map[string]bool) string {
	var best string
	var top uint64
	for _, n := range nodes {
		if down[n] {
			continue
		}
		h := fnv.New64a()
		h.Write([]byte(stream.String()))
		h.Write([]byte{0})
		h.Write([]byte(n))
		if s := h.Sum64(); best == "" || s > top {
			best, top = n, s
		}
	}
	return best
}

// NodeConfig configures a Node.
type NodeConfig struct {
	// Self is this node's base URL (http://host:port) as the others reach it.
	Self string
	// Nodes lists every relay node's base URL, Self included. Set and
	// replace with SetNodes.
	Nodes []string
	// OwnerFanout and ChildFanout override the defaults (tests).
	OwnerFanout, ChildFanout int
	Logger                   *slog.Logger
	Registerer               prometheus.Registerer
	// Client reaches the other nodes (default: one of its own).
	Client *http.Client
}

// Node is one relay node: an http.Handler.
type Node struct {
	cfg NodeConfig
	log *slog.Logger

	mu     sync.Mutex
	nodes  []string
	topics map[topicKey]*topic

	copies, lost prometheus.Counter
	subs         prometheus.Gauge
}

// topicKey names a topic: a stream as fed from one parent ("" on the
// stream's owner, fed by publishers). A node may hold one stream under
// two parents while the tree re-forms: it was the owner, or a child of
// the former owner, when a node joined and took the stream, and the new
// owner redirects subscribers to it. Each such topic keeps its own
// upstream and readiness, so a subscriber the new owner sent is fed by
// the new owner (not by the former one, which is no longer published
// to) and answered only once the new owner answered.
type topicKey struct {
	stream snowflake.ID
	parent string
}

// topic is one stream, from one parent, on this node.
type topic struct {
	subs     map[*sub]struct{}
	children map[string]int     // child relay -> subscribers redirected to it
	upstream context.CancelFunc // set once an upstream subscription opens
	// ready is closed once this node receives what is published to the
	// stream: at once on its owner, when the upstream answered on a relay
	// below it. A subscriber is answered only then, so what is published
	// after its subscription is answered reaches it.
	// Closed by one party only: the subscriber that creates an owner's
	// topic, or the upstream's answer (read calls opened once).
	ready chan struct{}
}

type sub struct {
	mu    sync.Mutex
	queue [][]byte
	wake  chan struct{}
	relay bool // a child relay's upstream, not a gateway
	lost  int
	// done ends the subscription (its upstream is gone).
	done chan struct{}
	once sync.Once
}

func (s *sub) end() { s.once.Do(func() { close(s.done) }) }

// NewNode returns a node.
func NewNode(cfg NodeConfig) *Node {
	if cfg.OwnerFanout <= 0 {
		cfg.OwnerFanout = OwnerFanout
	}
	if cfg.ChildFanout <= 0 {
		cfg.ChildFanout = ChildFanout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{}
	}
	n := &Node{cfg: cfg, log: cfg.Logger.With("component", "live-relay", "relay", cfg.Self), nodes: slices.Clone(cfg.Nodes),
		topics: map[topicKey]*topic{},
		copies: prometheus.NewCounter(prometheus.CounterOpts{Name: "concord_live_relay_copies_total", Help: "Messages copied to direct subscribers (gateways and child relays)."}),
		lost:   prometheus.NewCounter(prometheus.CounterOpts{Name: "concord_live_relay_lost_total", Help: "Messages dropped for a subscriber that fell behind."}),
		subs:   prometheus.NewGauge(prometheus.GaugeOpts{Name: "concord_live_relay_subscribers", Help: "Direct subscribers (gateways and child relays) of this relay."}),
	}
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(n.copies, n.lost, n.subs)
	}
	return n
}

// SetNodes replaces the relay nodes.
func (n *Node) SetNodes(nodes []string) {
	n.mu.Lock()
	n.nodes = slices.Clone(nodes)
	n.mu.Unlock()
}

// ServeHTTP serves the wire protocol.
func (n *Node) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1/relay/")
	if !ok {
		http.NotFound(w, r)
		return
	}
	stream, err := snowflake.Parse(rest)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	switch r.Method {
	case http.MethodPost:
		msg, err := io.ReadAll(io.LimitReader(r.Body, maxMessage))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("X-Relay-Copies", strconv.Itoa(n.publish(stream, msg)))
	case http.MethodGet:
		n.subscribe(w, r, stream)
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

// publish copies msg, published to this node as the stream's owner, to
// the stream's direct subscribers and returns how many.
func (n *Node) publish(stream snowflake.ID, msg []byte) int {
	n.mu.Lock()
	t := n.topics[topicKey{stream: stream}]
	n.mu.Unlock()
	return n.copyTo(t, msg)
}

// copyTo copies msg to t's subscribers (none when t is nil) and returns
// how many.
func (n *Node) copyTo(t *topic, msg []byte) int {
	n.mu.Lock()
	var subs []*sub
	if t != nil {
		subs = make([]*sub, 0, len(t.subs))
		for s := range t.subs {
			subs = append(subs, s)
		}
	}
	n.mu.Unlock()
	for _, s := range subs {
		s.mu.Lock()
		if len(s.queue) < queueLimit {
			s.queue = append(s.queue, msg)
		} else {
			s.lost++
			n.lost.Inc()
		}
		s.mu.Unlock()
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	n.copies.Add(float64(len(subs)))
	return len(subs)
}

// subscribe answers a subscription: served here, or redirected down the
// tree. ?relay=1 marks a child relay's upstream (always served: it is how
// the tree grows); ?path= lists the relays above (no cycles).
func (n *Node) subscribe(w http.ResponseWriter, r *http.Request, stream snowflake.ID) {
	q := r.URL.Query()
	isRelay := q.Get("relay") == "1"
	var path []string
	if p := q.Get("path"); p != "" {
		path = strings.Split(p, ",")
	}
	parent := q.Get("parent")
	key := topicKey{stream: stream, parent: parent}
	n.mu.Lock()
	t := n.topics[key]
	if t == nil {
		t = &topic{subs: map[*sub]struct{}{}, children: map[string]int{}, ready: make(chan struct{})}
		if parent == "" {
			// Asked as the stream's owner: publishers send here.
			close(t.ready)
		}
		n.topics[key] = t
	}
	fanout := n.cfg.ChildFanout
	if parent == "" {
		fanout = n.cfg.OwnerFanout
	}
	if !isRelay && len(t.subs) >= fanout {
		if child := n.childLocked(t, append(path, n.cfg.Self)); child != "" {
			t.children[child]++
			n.mu.Unlock()
			v := url.Values{"parent": {n.cfg.Self}, "path": {strings.Join(append(path, n.cfg.Self), ",")}}
			http.Redirect(w, r, child+"/v1/relay/"+stream.String()+"?"+v.Encode(), http.StatusTemporaryRedirect)
			return
		}
	}
	s := &sub{wake: make(chan struct{}, 1), relay: isRelay, done: make(chan struct{})}
	from := q.Get("from")
	t.subs[s] = struct{}{}
	if parent != "" && t.upstream == nil {
		// A relay below the owner: one subscription upstream feeds all
		// of its subscribers.
		ctx, cancel := context.WithCancel(context.Background())
		t.upstream = cancel
		go n.follow(ctx, key, t, path)
	}
	n.mu.Unlock()
	n.subs.Inc()
	defer func() {
		n.subs.Dec()
		n.mu.Lock()
		delete(t.subs, s)
		if isRelay && from != "" {
			// A child relay left (or died): no one is sent to it any more.
			delete(t.children, from)
		}
		if len(t.subs) == 0 && n.topics[key] == t {
			delete(n.topics, key)
			if t.upstream != nil {
				t.upstream()
			}
		}
		n.mu.Unlock()
	}()
	select {
	case <-t.ready:
	case <-r.Context().Done():
		return
	case <-s.done:
		http.Error(w, "relay: upstream lost", http.StatusBadGateway)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	if fl != nil {
		fl.Flush()
	}
	bw := bufio.NewWriter(w)
	var hdr [4]byte
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		case <-s.wake:
		}
		s.mu.Lock()
		q := s.queue
		s.queue = nil
		s.mu.Unlock()
		for _, msg := range q {
			binary.BigEndian.PutUint32(hdr[:], uint32(len(msg)))
			bw.Write(hdr[:])
			bw.Write(msg)
		}
		if err := bw.Flush(); err != nil {
			return
		}
		if fl != nil {
			fl.Flush()
		}
	}
}

// childLocked picks the child relay for a new subscriber: one already
// feeding the stream with room, else a node not on the path (rendezvous
// order, so siblings agree), else the least loaded child. n.mu is held.
func (n *Node) childLocked(t *topic, path []string) string {
	best := ""
	for c, k := range t.children {
		if k < n.cfg.ChildFanout && !slices.Contains(path, c) && (best == "" || k < t.children[best]) {
			best = c
		}
	}
	if best != "" {
		return best
	}
	for _, c := range n.nodes {
		if _, used := t.children[c]; !used && !slices.Contains(path, c) {
			return c
		}
	}
	for c, k := range t.children {
		if !slices.Contains(path, c) && (best == "" || k < t.children[best]) {
			best = c
		}
	}
	return best
}

// follow keeps this node subscribed upstream to parent and publishes what
// arrives to the local subscribers, until ctx ends or the parent is lost
// (then every local subscription ends, and re-forms through the owner).
func (n *Node) follow(ctx context.Context, key topicKey, t *topic, path []string) {
	stream, parent := key.stream, key.parent
	v := url.Values{"relay": {"1"}, "from": {n.cfg.Self}}
	if len(path) > 1 {
		v.Set("parent", path[len(path)-2])
		v.Set("path", strings.Join(path[:len(path)-1], ","))
	}
	err := read(ctx, n.cfg.Client, parent+"/v1/relay/"+stream.String()+"?"+v.Encode(), func() { close(t.ready) }, func(msg []byte) { n.copyTo(t, msg) })
	if ctx.Err() != nil {
		return
	}
	n.log.Warn("upstream relay lost; its subscribers will resubscribe", "stream", stream, "parent", parent, "err", err)
	// The parent is gone: drop the subscribers, who re-form the tree
	// through the owner (this node cannot know a replacement parent).
	n.dropAll(key, t)
}

// dropAll ends every subscription of t (their connections close).
func (n *Node) dropAll(key topicKey, t *topic) {
	n.mu.Lock()
	if n.topics[key] == t {
		delete(n.topics, key)
	}
	subs := make([]*sub, 0, len(t.subs))
	for s := range t.subs {
		subs = append(subs, s)
	}
	n.mu.Unlock()
	for _, s := range subs {
		s.end()
	}
}

// read follows one subscription at u until it ends; opened is called
// once the relay answered (from then on it delivers what is published).
func read(ctx context.Context, c *http.Client, u string, opened func(), deliver func([]byte)) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("relay subscribe %s: status %d", u, resp.StatusCode)
	}
	opened()
	br := bufio.NewReader(resp.Body)
	var hdr [4]byte
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return err
		}
		size := binary.BigEndian.Uint32(hdr[:])
		if size > maxMessage {
			return fmt.Errorf("relay frame of %d bytes", size)
		}
		msg := make([]byte, size)
		if _, err := io.ReadFull(br, msg); err != nil {
			return err
		}
		deliver(msg)
	}
}
