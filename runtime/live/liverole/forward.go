package liverole

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync/atomic"

	"github.com/concord-chat/concord/runtime/registry"
	"github.com/concord-chat/concord/runtime/role"
)

// forwarder answers GET /v1/streams/{id}/live on a live-api process that
// runs no gateway: it forwards the request to a live-gateway node of the
// registry. The node is chosen by rendezvous hashing of the stream id
// over the live gateways, so one stream's viewers meet on one gateway
// (one relay copy per stream, not per viewer) while the set is stable,
// and only the streams of a node that leaves move.
type forwarder struct {
	reg   registry.Registry
	log   *slog.Logger
	nodes atomic.Pointer[[]registry.Node]
	proxy *httputil.ReverseProxy
}

func newForwarder(b *role.Builder) (*forwarder, error) {
	if b.Registry == nil {
		return nil, fmt.Errorf("live-api: forwarding to live gateways needs the registry")
	}
	f := &forwarder{reg: b.Registry, log: b.Logger.With("component", "live-forward")}
	f.nodes.Store(&[]registry.Node{})
	f.proxy = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			target, _ := r.In.Context().Value(targetKey{}).(*url.URL)
			r.SetURL(target)
			r.SetXForwarded()
		},
		// An event stream is flushed as it comes (ReverseProxy does so
		// for text/event-stream by itself); -1 keeps it so for any type.
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			f.log.Warn("live gateway unreachable", "err", err)
			unavailable(w, "The live gateway is unreachable.")
		},
	}
	return f, nil
}

type targetKey struct{}

// Run follows the live-gateway nodes of the registry until ctx ends.
func (f *forwarder) Run(ctx context.Context) error {
	ch, err := f.reg.Watch(ctx, NameGateway)
	if err != nil {
		return fmt.Errorf("live-api: watch live gateways: %w", err)
	}
	for snap := range ch {
		var live []registry.Node
		for _, n := range snap.Nodes {
			if n.HasRole(NameGateway) && !n.Draining && n.HTTPAddr != "" {
				live = append(live, n)
			}
		}
		f.nodes.Store(&live)
	}
	return nil
}

// pick returns the gateway for stream: the node with the highest hash of
// (stream, node name).
func (f *forwarder) pick(stream string) (registry.Node, bool) {
	nodes := *f.nodes.Load()
	var best registry.Node
	var top uint64
	for _, n := range nodes {
		h := fnv.New64a()
		h.Write([]byte(stream))
		h.Write([]byte{0})
		h.Write([]byte(n.Name))
		if s := h.Sum64(); best.Name == "" || s > top {
			best, top = n, s
		}
	}
	return best, best.Name != ""
}

func (f *forwarder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n, ok := f.pick(r.PathValue("id"))
	if !ok {
		unavailable(w, "No live gateway is running.")
		return
	}
	target := &url.URL{Scheme: "http", Host: n.HTTPAddr}
	f.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), targetKey{}, target)))
}

// unavailable writes the contract's 503 (code 130000) with Retry-After.
func unavailable(w http.ResponseWriter, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", "5")
	w.WriteHeader(http.StatusServiceUnavailable)
	json.NewEncoder(w).Encode(map[string]any{"code": 130000, "message": msg})
}
