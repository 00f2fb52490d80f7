// Package gateway is Concord's Discord-compatible gateway: the WebSocket
// endpoint (/gateway) that bots and apps hold open to receive dispatches.
//
// A Node speaks Discord's gateway protocol v9/v10 with JSON encoding:
// HELLO, IDENTIFY → READY, heartbeats with server-side zombie detection,
// per-session sequence numbers and a bounded replay buffer for RESUME,
// INVALID_SESSION, RECONNECT on drain with the sessions handed to a
// successor node (handoff.go), Discord's close codes 4000–4014,
// client payload size and rate limits, and zlib-stream, zstd-stream or per-payload zlib
// compression. It asks a Backend to authenticate sessions and subscribe
// them to their guilds, and it is the event.Sink the guild tier delivers
// batches to: each dispatch is stamped with the session's next sequence
// number, buffered for RESUME and written to the socket without waiting on
// it (one non-blocking write when the socket is idle, else a bounded queue
// drained by the connection's writer goroutine).
package gateway

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
)

// Node is one gateway node: an http.Handler for /gateway and the
// event.Sink for the sessions it holds.
type Node struct {
	cfg     Config
	backend Backend
	metrics *metrics
	limits  replayLimits

	upgrader    websocket.Upgrader
	payloadComp payloadCompressor
	readBufs    sync.Pool
	readBufs4k  sync.Pool // the poller's read buffers (reader.go)
	encBufs     sync.Pool
	scratch     sync.Pool // *writeScratch, one per write in progress (writer.go)

	// poll reports readable sockets (poll_linux.go); nil where there is
	// none or Config.GoroutineReader is set.
	poll *poller

	smu sync.RWMutex
	// warmSink takes deliverTargets' sum of warmed fields, only so that
	// the compiler keeps the loads (session.warm).
	warmSink atomic.Uintptr
	sessions map[event.SessionID]*session

	cmu   sync.Mutex
	conns map[*conn]struct{}
	wg    sync.WaitGroup

	draining atomic.Bool
	closed   atomic.Bool

	handoff *handoffState

	// wheel holds the node's coarse timers (wheel.go). It runs on the
	// wall clock, not Config.Now: a test's frozen clock must not stop
	// resume windows from ending.
	wheel *wheel
}

var (
	_ event.Sink   = (*Node)(nil)
	_ http.Handler = (*Node)(nil)
)

// NewNode returns a gateway node with cfg's defaults filled in.
func NewNode(cfg Config, backend Backend) (*Node, error) {
	if backend == nil {
		return nil, fmt.Errorf("%w: nil backend", ErrInvalidConfig)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Registerer, cfg.Node)
	if err != nil {
		return nil, err
	}
	h, err := newHandoffState(cfg.Registerer, cfg.Node)
	if err != nil {
		return nil, err
	}
	n := &Node{
		handoff: h,
		cfg:     cfg,
		backend: backend,
		metrics: m,
		limits: replayLimits{
			maxEvents: cfg.ReplayMaxEvents,
			maxBytes:  cfg.ReplayMaxBytes,
			maxAge:    int64(cfg.ReplayMaxAge),
		},
		sessions: make(map[event.SessionID]*session),
		conns:    make(map[*conn]struct{}),
		wheel:    newWheel(wheelTick(min(cfg.ReplayMaxAge, cfg.ZombieTimeout, cfg.IdentifyTimeout, cfg.CompressIdle)), time.Now),
	}
	n.upgrader = websocket.Upgrader{
		ReadBufferSize: 1024,
		// The node writes its own frames; gorilla only writes the handshake.
		WriteBufferPool: &sync.Pool{},
		// Bots send no Origin and the web client is served from the same
		// origin; the token authenticates, not the origin.
		CheckOrigin: func(*http.Request) bool { return true },
	}
	if !cfg.GoroutineReader {
		if n.poll, err = newPoller(); err != nil {
			return nil, err
		}
	}
	n.readBufs.New = func() any {
		b := make([]byte, cfg.MaxPayload+1)
		return &b
	}
	return n, nil
}

// ServeHTTP upgrades a /gateway request (?v=9|10&encoding=json
// [&compress=zlib-stream|zstd-stream]) and runs the connection until it ends. Mount it
// at both /gateway and /gateway/. An unsupported v is closed with 4012
// and an encoding other than json with 4002, right after the upgrade.
// Another compress value gets uncompressed text frames, which every
// library accepts. On Linux a plain TCP connection is then read by the
// node's poller (reader.go) and this goroutine returns; otherwise it
// reads the connection until it ends.
func (n *Node) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if n.closed.Load() {
		http.Error(w, "gateway node closed", http.StatusServiceUnavailable)
		return
	}
	q := r.URL.Query()
	apiVersion, closeCode, reason := 10, 0, ""
	switch q.Get("v") {
	case "", "10":
	case "9":
		apiVersion = 9
	default:
		closeCode, reason = CloseInvalidAPIVersion, "invalid API version"
	}
	if enc := q.Get("encoding"); closeCode == 0 && enc != "" && enc != "json" {
		closeCode, reason = CloseDecodeError, "unsupported encoding"
	}
	comp := parseCompress(q.Get("compress"))
	ws, err := n.upgrader.Upgrade(w, r, nil)
	if err != nil {
		n.cfg.Logger.Debug("gateway upgrade failed", "err", err)
		return
	}
	// A TCP connection, or a listener's wrapper of one (httpserve).
	if tc, ok := ws.NetConn().(interface{ SetWriteBuffer(int) error }); ok && n.cfg.SocketSendBuffer > 0 {
		_ = tc.SetWriteBuffer(n.cfg.SocketSendBuffer)
	}
	c := newConn(n, ws, apiVersion, comp, n.resumeURL(r))
	if !n.addConn(c) {
		_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseGoingAway, "node closed"), time.Now().Add(time.Second))
		_ = ws.Close()
		return
	}
	if closeCode != 0 {
		defer n.removeConn(c)
		c.closeWith(closeCode, reason)
		return
	}
	hello := fmt.Sprintf(`{"heartbeat_interval":%d,"_trace":["concord-gateway"]}`, n.cfg.HeartbeatInterval.Milliseconds())
	if c.raw != nil && n.poll != nil && pollable(c.nc) {
		// Read by the node's poller: this goroutine, with the HTTP
		// server's buffers it keeps alive, ends here, and gorilla's
		// reader is not used. From now on the writer's exit ends the
		// connection (conn.socketClosed).
		c.polled = true
		c.ws = nil
		c.armDeadline()
		if !n.poll.add(c) {
			c.close(0, "") // the socket is already gone
			return
		}
		c.sendControl(controlFrame(OpHello, hello))
		return
	}
	defer n.removeConn(c)
	c.sendControl(controlFrame(OpHello, hello))
	code := c.readLoop()
	c.close(0, "")
	c.cancel()
	if c.sess != nil {
		c.sess.connGone(c, code)
	}
}

// resumeURL is READY's resume_gateway_url for a request.
func (n *Node) resumeURL(r *http.Request) string {
	if n.cfg.PublicURL != "" {
		return n.cfg.PublicURL
	}
	scheme := "ws"
	if r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https" {
		scheme = "wss"
	}
	return scheme + "://" + r.Host + "/gateway"
}

// Deliver stamps each target session's next sequence number on the
// batch's dispatch, buffers it for resume and sends it: an idle socket
// gets it with one non-blocking write on the calling goroutine (big
// batches are split over GOMAXPROCS goroutines), a busy one through its
// bounded queue. It never waits on a socket: a connection whose queue is
// full is closed resumably. Batches for another node name, unknown sessions and
// out-of-range variants are skipped. Deliver keeps references to
// b.Payloads: callers must not modify them afterwards.
func (n *Node) Deliver(ctx context.Context, node string, b event.Batch) {
	if node != n.cfg.Node {
		n.cfg.Logger.Debug("batch for another node dropped", "node", node, "type", b.Type)
		return
	}
	if b.Type == event.MoveMarker {
		n.marker(b)
		return
	}
	if !validEventName(b.Type) {
		n.cfg.Logger.Warn("batch with invalid event name dropped", "type", b.Type)
		return
	}
	bodies := make([]body, len(b.Payloads))
	for i, p := range b.Payloads {
		bodies[i] = body{t: b.Type, d: p, sent: messageSent(b.Type, p), out: n.metrics.sentBytes.WithLabelValues(b.Type)}
	}
	n.smu.RLock()
	defer n.smu.RUnlock()
	workers := min(runtime.GOMAXPROCS(0), len(b.Targets)/parallelDeliverMin)
	if workers <= 1 {
		n.deliverTargets(bodies, b.Targets)
		return
	}
	// Big batches are stamped and written by several goroutines, each
	// taking a contiguous share of the targets; Deliver returns when all
	// are done, so batches stay ordered per session.
	var wg sync.WaitGroup
	per := (len(b.Targets) + workers - 1) / workers
	for i := 0; i < len(b.Targets); i += per {
		part := b.Targets[i:min(i+per, len(b.Targets))]
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.deliverTargets(bodies, part)
		}()
	}
	wg.Wait()
}

// parallelDeliverMin is the number of targets per extra goroutine Deliver
// uses for a batch.
const parallelDeliverMin = 256

// deliverChunk is how many targets deliverTargets looks up and warms
// before it writes to the first of them.
const deliverChunk = 32

// deliverTargets stamps and sends a batch's variants to targets. n.smu
// must be read-held.
//
// It works in chunks. Every delivery is a system call, and the CPU does
// not run ahead across one, so a cache miss on a session (its map slot,
// its struct, its connection) taken between two writes is paid in full,
// one after another. A chunk's sessions are looked up and their hot
// fields read first, in a loop without system calls, where the misses
// overlap; the writes then find them in cache.
//
// The clock is read once per chunk: it stamps the chunk's frames (their
// replay age, and the send-to-socket latency of those written at once),
// within a chunk's writes of the truth.
func (n *Node) deliverTargets(bodies []body, targets []event.Target) {
	delta, delivered := 0, 0
	var chunk [deliverChunk]*session
	var variant [deliverChunk]int
	var warmed uintptr
	for len(targets) > 0 {
		part := targets[:min(len(targets), deliverChunk)]
		targets = targets[len(part):]
		k := 0
		for _, t := range part {
			s := n.sessions[t.Session]
			if s == nil || t.Variant < 0 || t.Variant >= len(bodies) {
				continue
			}
			chunk[k], variant[k] = s, t.Variant
			k++
		}
		for _, s := range chunk[:k] {
			warmed += s.warm()
		}
		now := n.cfg.Now().UnixNano()
		for i, s := range chunk[:k] {
			if d, ok := s.dispatch(&bodies[variant[i]], now); ok {
				delta += d
				delivered++
			}
		}
	}
	n.warmSink.Store(warmed)
	n.metrics.deliveries.Add(float64(delivered))
	n.metrics.replayBufferBytes.Add(float64(delta))
}

// SendTo delivers one dispatch to one session on this node.
func (n *Node) SendTo(id event.SessionID, typ string, payload []byte) error {
	if !validEventName(typ) {
		return fmt.Errorf("gateway: send %q: invalid event name", typ)
	}
	s := n.lookup(id)
	if s == nil {
		return fmt.Errorf("%w: %s", ErrUnknownSession, id)
	}
	d, ok := s.dispatch(&body{t: typ, d: payload, out: n.metrics.sentBytes.WithLabelValues(typ)}, n.cfg.Now().UnixNano())
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownSession, id)
	}
	n.metrics.deliveries.Inc()
	n.metrics.replayBufferBytes.Add(float64(d))
	return nil
}

// Drain sends RECONNECT (op 7) to every attached session and stops taking
// IDENTIFY: later identifies get op 9 d:false. Sessions stay resumable
// here until their resume window ends; HandOff gives them to a successor
// instead.
func (n *Node) Drain(ctx context.Context) error {
	n.draining.Store(true)
	for _, s := range n.snapshot() {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("gateway: drain: %w", err)
		}
		s.mu.Lock()
		if c := s.conn; c != nil {
			c.sendControl(frameReconnect)
		}
		s.mu.Unlock()
	}
	return nil
}

// Close closes every connection with 1001, ends every session
// (Backend.Disconnect) and waits for the connections' writers to stop.
func (n *Node) Close() error {
	if n.closed.Swap(true) {
		return nil
	}
	n.cmu.Lock()
	conns := make([]*conn, 0, len(n.conns))
	for c := range n.conns {
		conns = append(conns, c)
	}
	n.cmu.Unlock()
	for _, c := range conns {
		c.close(websocket.CloseGoingAway, "node closed")
	}
	for _, s := range n.snapshot() {
		s.end(context.Background())
	}
	n.wg.Wait()
	n.wheel.close()
	n.poll.close()
	return nil
}

// StopIdentify makes the node refuse IDENTIFY from now on (op 9 d:false),
// as Drain and HandOff do first; RESUME still works.
func (n *Node) StopIdentify() { n.draining.Store(true) }

// Draining reports whether StopIdentify, Drain or HandOff was called.
func (n *Node) Draining() bool { return n.draining.Load() }

// Sessions returns how many sessions the node holds, attached or waiting
// for RESUME (or, on a successor, waiting for their import).
func (n *Node) Sessions() int {
	n.smu.RLock()
	defer n.smu.RUnlock()
	return len(n.sessions)
}

func (n *Node) lookup(id event.SessionID) *session {
	n.smu.RLock()
	defer n.smu.RUnlock()
	return n.sessions[id]
}

// CloseUser ends every session of a user on this node for good: each
// socket is closed with code (for example CloseAuthenticationFailed after
// a token reset) and the session is not resumable. It returns how many
// sessions ended.
func (n *Node) CloseUser(ctx context.Context, userID snowflake.ID, code int, reason string) int {
	ended := 0
	for _, s := range n.snapshot() {
		if s.info.UserID != userID {
			continue
		}
		s.mu.Lock()
		c := s.conn
		s.mu.Unlock()
		if c != nil {
			c.closeWith(code, reason)
		}
		s.end(ctx)
		ended++
	}
	return ended
}

func (n *Node) snapshot() []*session {
	n.smu.RLock()
	defer n.smu.RUnlock()
	out := make([]*session, 0, len(n.sessions))
	for _, s := range n.sessions {
		out = append(out, s)
	}
	return out
}

// addSession registers s; it fails once the node is closed.
func (n *Node) addSession(s *session) bool {
	n.smu.Lock()
	defer n.smu.Unlock()
	if n.closed.Load() {
		return false
	}
	n.sessions[s.info.ID] = s
	n.metrics.sessions.Inc()
	return true
}

func (n *Node) removeSession(s *session) {
	n.smu.Lock()
	defer n.smu.Unlock()
	if n.sessions[s.info.ID] == s {
		delete(n.sessions, s.info.ID)
		n.metrics.sessions.Dec()
	}
}

// addConn tracks c until its writer stops; it fails once the node is closed.
func (n *Node) addConn(c *conn) bool {
	n.cmu.Lock()
	defer n.cmu.Unlock()
	if n.closed.Load() {
		return false
	}
	n.conns[c] = struct{}{}
	n.wg.Add(1)
	n.metrics.connections.Inc()
	return true
}

// removeConn waits for c's writer, then forgets c.
func (n *Node) removeConn(c *conn) {
	<-c.done
	n.cmu.Lock()
	delete(n.conns, c)
	n.cmu.Unlock()
	n.metrics.connections.Dec()
	n.wg.Done()
}
