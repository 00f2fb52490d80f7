//go:build livebench

// Command livepeer is the peer of the live-comments benchmark
// (test/live, build tag livebench): an SSE broadcaster built on
// github.com/centrifugal/centrifuge as a library, run as a process of its
// own so its CPU is read the way the gateways' is. Viewers open GET /sse
// and are subscribed on the server side to one channel; each POST
// /publish body is published to that channel, and centrifuge writes it to
// every viewer as one "data:" event over a unidirectional transport (the
// client never sends a command). GET /subscribers answers the channel's
// subscriber count.
//
// It is built only with the livebench tag, so the concord binary never
// links centrifuge.
package main

import (
	"context"
	"flag"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/centrifugal/centrifuge"
)

const channel = "bench"

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address (the bound address is printed on stdout)")
	flag.Parse()
	node, err := centrifuge.New(centrifuge.Config{LogLevel: centrifuge.LogLevelNone})
	if err != nil {
		log.Fatalf("livepeer: centrifuge: %v", err)
	}
	node.OnConnecting(func(ctx context.Context, e centrifuge.ConnectEvent) (centrifuge.ConnectReply, error) {
		return centrifuge.ConnectReply{
			Credentials:   &centrifuge.Credentials{UserID: ""},
			Subscriptions: map[string]centrifuge.SubscribeOptions{channel: {}},
		}, nil
	})
	if err := node.Run(); err != nil {
		log.Fatalf("livepeer: centrifuge run: %v", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /sse", func(w http.ResponseWriter, r *http.Request) { serveSSE(node, w, r) })
	mux.HandleFunc("POST /publish", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if _, err := node.Publish(channel, body); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /subscribers", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, strconv.Itoa(node.Hub().NumSubscribers(channel)))
	})
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatalf("livepeer: listen: %v", err)
	}
	os.Stdout.WriteString("http://" + ln.Addr().String() + "\n")
	log.Fatal((&http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}).Serve(ln))
}

// serveSSE runs one viewer: a centrifuge client on a unidirectional
// transport, connected at once (subscribed by OnConnecting), until the
// viewer leaves or centrifuge closes the transport.
func serveSSE(node *centrifuge.Node, w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if err := rc.Flush(); err != nil {
		return
	}
	t := &sseTransport{w: w, rc: rc, done: make(chan struct{})}
	c, closeFn, err := centrifuge.NewClient(r.Context(), node, t)
	if err != nil {
		return
	}
	defer closeFn()
	c.Connect(centrifuge.ConnectRequest{})
	select {
	case <-r.Context().Done():
	case <-t.done:
	}
	t.mu.Lock()
	t.closed = true // the handler returns: no write may touch w after
	t.mu.Unlock()
}

// sseTransport writes each push centrifuge hands it as one SSE event.
type sseTransport struct {
	w  http.ResponseWriter
	rc *http.ResponseController

	mu     sync.Mutex
	closed bool
	once   sync.Once
	done   chan struct{}
}

func (t *sseTransport) Name() string                      { return "uni_sse" }
func (t *sseTransport) AcceptProtocol() string            { return "h1" }
func (t *sseTransport) Protocol() centrifuge.ProtocolType { return centrifuge.ProtocolTypeJSON }
func (t *sseTransport) ProtocolVersion() centrifuge.ProtocolVersion {
	return centrifuge.ProtocolVersion2
}
func (t *sseTransport) Unidirectional() bool      { return true }
func (t *sseTransport) Emulation() bool           { return false }
func (t *sseTransport) DisabledPushFlags() uint64 { return centrifuge.PushFlagDisconnect }
func (t *sseTransport) PingPongConfig() centrifuge.PingPongConfig {
	// As the gateway: a ping every 15 s to each viewer; viewers of a
	// unidirectional stream never answer, so no pong is awaited.
	return centrifuge.PingPongConfig{PingInterval: 15 * time.Second, PongTimeout: -1}
}

func (t *sseTransport) Write(b []byte) error { return t.WriteMany(b) }

// WriteMany writes the pushes and flushes once, as the gateway flushes a
// viewer's queued events in one write.
func (t *sseTransport) WriteMany(bs ...[]byte) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return io.ErrClosedPipe
	}
	t.rc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	for _, b := range bs {
		if _, err := t.w.Write(append(append([]byte("data: "), b...), "\n\n"...)); err != nil {
			return err
		}
	}
	return t.rc.Flush()
}

func (t *sseTransport) Close(centrifuge.Disconnect) error {
	t.once.Do(func() { close(t.done) })
	return nil
}
