// Command mercurepeer is the second peer of the live-comments benchmark
// (test/live, build tag livebench): an SSE hub built on
// github.com/dunglas/mercure as a library, run as a process of its own
// so its CPU is read the way the gateways' is. Viewers open GET /sse and
// are subscribed (anonymously) to one topic; each POST /publish body is
// published to that topic with Hub.Publish, and mercure writes it to
// every subscriber as an SSE event. GET /subscribers answers the number
// of connected subscribers. The hub sends its heartbeat every 15 s, as
// the gateway pings.
//
// It is its own Go module, so mercure and its dependencies stay out of
// Concord's.
package main

import (
	"context"
	"flag"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/dunglas/mercure"
)

const topic = "https://concord.invalid/bench"

// counter is the hub's Metrics: it counts connected subscribers.
type counter struct{ n atomic.Int64 }

func (c *counter) SubscriberConnected(*mercure.LocalSubscriber)    { c.n.Add(1) }
func (c *counter) SubscriberDisconnected(*mercure.LocalSubscriber) { c.n.Add(-1) }
func (c *counter) UpdatePublished(*mercure.Update)                 {}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address (the bound address is printed on stdout)")
	flag.Parse()
	ctx := context.Background()
	subs := &counter{}
	hub, err := mercure.NewHub(ctx,
		mercure.WithAnonymous(),
		mercure.WithMetrics(subs),
		mercure.WithHeartbeat(15*time.Second),
		mercure.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
	)
	if err != nil {
		log.Fatalf("mercurepeer: hub: %v", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /sse", func(w http.ResponseWriter, r *http.Request) {
		// The hub's subscribe endpoint, with the bench topic.
		r.URL.Path = "/.well-known/mercure"
		r.URL.RawQuery = "topic=" + topic
		hub.SubscribeHandler(w, r)
	})
	mux.HandleFunc("POST /publish", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := hub.Publish(r.Context(), &mercure.Update{Topics: []string{topic}, Event: mercure.Event{Data: string(body)}}); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /subscribers", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, strconv.FormatInt(subs.n.Load(), 10))
	})
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatalf("mercurepeer: listen: %v", err)
	}
	os.Stdout.WriteString("http://" + ln.Addr().String() + "\n")
	log.Fatal((&http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}).Serve(ln))
}
