package load

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/centrifugal/centrifuge"
	"github.com/gorilla/websocket"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/edge/gateway"
)

// Systems the benchmark compares.
const (
	// SystemGateway is Concord's gateway node: IDENTIFY/READY sessions,
	// one Deliver of a batch with N targets.
	SystemGateway = "concord-gateway"
	// SystemCentrifuge is a centrifuge node with its WebSocket handler:
	// N clients subscribed to one channel, one Publish.
	SystemCentrifuge = "centrifuge"
	// SystemWriteLoop is a floor, not a product: a gorilla/websocket server
	// that writes one prepared frame to every socket from a single loop.
	SystemWriteLoop = "write-loop-floor"
	// SystemGatewayZlib and SystemGatewayZstd are the gateway with its
	// clients on ?compress=zlib-stream and ?compress=zstd-stream.
	SystemGatewayZlib = "concord-gateway-zlib-stream"
	SystemGatewayZstd = "concord-gateway-zstd-stream"
)

// compressed reports whether system's clients receive compressed
// frames, which they count rather than parse (see readLoop).
func compressed(system string) bool {
	return system == SystemGatewayZlib || system == SystemGatewayZstd
}

// typedPublisher is a server whose events carry a type (the gateway's
// dispatch name), for the event mix.
type typedPublisher interface {
	publishEvent(t string, payload []byte)
}

// server is one system under test.
type server interface {
	// url is the WebSocket URL clients dial.
	url() string
	// ready waits until n clients are subscribed.
	ready(ctx context.Context, n int) error
	// publish sends payload to every client.
	publish(payload []byte)
	close()
}

// listen serves h on a fresh loopback port.
func listen(h http.Handler) (net.Listener, *http.Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, fmt.Errorf("load: listen: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: time.Minute}
	go func() { _ = srv.Serve(ln) }()
	return ln, srv, nil
}

// gatewayServer is a Concord gateway node with a backend that admits any
// token and records subscribed sessions.
type gatewayServer struct {
	node *gateway.Node
	ln   net.Listener
	srv  *http.Server

	mu      sync.Mutex
	nextID  snowflake.ID
	targets []event.Target
	changed chan struct{}
	batch   event.Batch
	// compress is the clients' ?compress= value, "" for none.
	compress string
}

func newGatewayServer(compress string, compressIdle time.Duration) (*gatewayServer, error) {
	g := &gatewayServer{nextID: 1 << 40, changed: make(chan struct{}, 1), compress: compress}
	node, err := gateway.NewNode(gateway.Config{
		Node: "load-gw",
		// Clients do not heartbeat during the run; keep them attached.
		ZombieTimeout: time.Hour,
		CompressIdle:  compressIdle,
		Logger:        slog.New(slog.DiscardHandler),
	}, g)
	if err != nil {
		return nil, err
	}
	g.node = node
	mux := http.NewServeMux()
	mux.Handle("/gateway", node)
	if g.ln, g.srv, err = listen(mux); err != nil {
		return nil, err
	}
	return g, nil
}

func (g *gatewayServer) url() string {
	u := "ws://" + g.ln.Addr().String() + "/gateway?v=10&encoding=json"
	if g.compress != "" {
		u += "&compress=" + g.compress
	}
	return u
}

// Identify implements gateway.Backend: every token is a new bot user.
func (g *gatewayServer) Identify(ctx context.Context, token string, s event.Session) (event.Ready, error) {
	g.mu.Lock()
	g.nextID++
	id := g.nextID
	g.mu.Unlock()
	return event.Ready{UserID: id, Bot: true}, nil
}

// Subscribe implements gateway.Backend: it records the session as a target.
func (g *gatewayServer) Subscribe(ctx context.Context, s event.Session) error {
	g.mu.Lock()
	g.targets = append(g.targets, event.Target{Session: s.ID})
	g.mu.Unlock()
	select {
	case g.changed <- struct{}{}:
	default:
	}
	return nil
}

// Disconnect implements gateway.Backend.
func (g *gatewayServer) Disconnect(ctx context.Context, s event.Session) {}

func (g *gatewayServer) ready(ctx context.Context, n int) error {
	for {
		g.mu.Lock()
		got := len(g.targets)
		g.mu.Unlock()
		if got >= n {
			g.batch = event.Batch{Type: "MESSAGE_CREATE", Payloads: make([]json.RawMessage, 1), Targets: g.targets}
			return nil
		}
		select {
		case <-g.changed:
		case <-ctx.Done():
			return fmt.Errorf("load: %d of %d gateway sessions subscribed: %w", got, n, ctx.Err())
		}
	}
}

func (g *gatewayServer) publish(payload []byte) { g.publishEvent("MESSAGE_CREATE", payload) }

func (g *gatewayServer) publishEvent(t string, payload []byte) {
	g.batch.Type = t
	g.batch.Payloads[0] = payload
	g.node.Deliver(context.Background(), "load-gw", g.batch)
}

func (g *gatewayServer) close() {
	_ = g.node.Close()
	_ = g.srv.Close()
}

// centrifugeServer is a centrifuge node whose clients subscribe to "bench".
type centrifugeServer struct {
	node *centrifuge.Node
	ln   net.Listener
	srv  *http.Server
}

func newCentrifugeServer() (*centrifugeServer, error) {
	node, err := centrifuge.New(centrifuge.Config{LogLevel: centrifuge.LogLevelNone})
	if err != nil {
		return nil, fmt.Errorf("load: centrifuge: %w", err)
	}
	node.OnConnecting(func(ctx context.Context, e centrifuge.ConnectEvent) (centrifuge.ConnectReply, error) {
		return centrifuge.ConnectReply{Credentials: &centrifuge.Credentials{UserID: "bench"}}, nil
	})
	node.OnConnect(func(c *centrifuge.Client) {
		c.OnSubscribe(func(e centrifuge.SubscribeEvent, cb centrifuge.SubscribeCallback) {
			cb(centrifuge.SubscribeReply{}, nil)
		})
	})
	if err := node.Run(); err != nil {
		return nil, fmt.Errorf("load: centrifuge run: %w", err)
	}
	c := &centrifugeServer{node: node}
	mux := http.NewServeMux()
	mux.Handle("/connection/websocket", centrifuge.NewWebsocketHandler(node, centrifuge.WebsocketConfig{
		CheckOrigin:        func(*http.Request) bool { return true },
		UseWriteBufferPool: true,
		// As the gateway's default: a loaded 2-core machine can stall a
		// write past centrifuge's 1 s default, which disconnects the client.
		WriteTimeout: 10 * time.Second,
		// Clients do not answer pings during the run.
		PingPongConfig: centrifuge.PingPongConfig{PingInterval: -1},
	}))
	if c.ln, c.srv, err = listen(mux); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *centrifugeServer) url() string {
	return "ws://" + c.ln.Addr().String() + "/connection/websocket"
}

func (c *centrifugeServer) ready(ctx context.Context, n int) error {
	for {
		got := c.node.Hub().NumSubscribers("bench")
		if got >= n {
			return nil
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
			return fmt.Errorf("load: %d of %d centrifuge subscribers: %w", got, n, ctx.Err())
		}
	}
}

func (c *centrifugeServer) publish(payload []byte) {
	_, _ = c.node.Publish("bench", payload)
}

func (c *centrifugeServer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = c.node.Shutdown(ctx)
	_ = c.srv.Close()
}

// writeLoopServer writes each payload to every socket from one loop.
type writeLoopServer struct {
	ln  net.Listener
	srv *http.Server

	mu    sync.Mutex
	conns []*websocket.Conn
}

func newWriteLoopServer() (*writeLoopServer, error) {
	w := &writeLoopServer{}
	up := websocket.Upgrader{WriteBufferPool: &sync.Pool{}, CheckOrigin: func(*http.Request) bool { return true }}
	var err error
	w.ln, w.srv, err = listen(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(rw, r, nil)
		if err != nil {
			return
		}
		w.mu.Lock()
		w.conns = append(w.conns, ws)
		w.mu.Unlock()
		for {
			if _, _, err := ws.ReadMessage(); err != nil {
				return
			}
		}
	}))
	return w, err
}

func (w *writeLoopServer) url() string { return "ws://" + w.ln.Addr().String() + "/" }

func (w *writeLoopServer) ready(ctx context.Context, n int) error {
	for {
		w.mu.Lock()
		got := len(w.conns)
		w.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
			return fmt.Errorf("load: %d of %d sockets: %w", got, n, ctx.Err())
		}
	}
}

func (w *writeLoopServer) publish(payload []byte) {
	pm, err := websocket.NewPreparedMessage(websocket.TextMessage, payload)
	if err != nil {
		return
	}
	w.mu.Lock()
	conns := w.conns
	w.mu.Unlock()
	for _, c := range conns {
		_ = c.WritePreparedMessage(pm)
	}
}

func (w *writeLoopServer) close() {
	w.mu.Lock()
	for _, c := range w.conns {
		_ = c.Close()
	}
	w.mu.Unlock()
	_ = w.srv.Close()
}
