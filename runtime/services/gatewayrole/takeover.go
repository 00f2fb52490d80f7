package gatewayrole

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/base/adminapi"
	"github.com/concord-chat/concord/runtime/edge/adminauth"
	"github.com/concord-chat/concord/runtime/edge/gateway"
	"github.com/concord-chat/concord/runtime/services/wiring"
)

// The session takeover of `concord serve` (gateway.Peers): a RESUME that
// reaches a gateway node which does not hold the session asks the other
// gateway nodes, on their admin endpoints, beside the drain's hand-off
// endpoints:
//
//	POST /admin/sessions/take  gateway.TakeRequest → 200 gateway.SessionExport
//	                                               | 404 not held | 403 wrong token
//
// Finding the holder asks every live gateway node of the registry at once
// (the ones that do not hold the session answer 404 straight away), as
// the session directory of user events does (sessions.go), rather than
// keeping a session → node map in etcd: such a map would cost a write at
// every IDENTIFY, RESUME and hand-off, could disagree with the nodes
// after a crash, and would need cleaning when a node dies, while asking
// the nodes is exact and costs one small request per gateway node per
// RESUME that lands away from its session. The hand-off goes over the
// admin endpoint like the drain's: the same export (the replay buffer's
// JSON dispatches embedded as they are), authenticated by the cluster's
// admin token, and no change to the GatewayNode gRPC service every guild
// node dials.

// takeSessionPath is the holder's endpoint.
const takeSessionPath = "/admin/sessions/take"

// maxTakeBody bounds a take request (a session id and a token hash).
const maxTakeBody = 4 << 10

// handleTake serves POST /admin/sessions/take on node.
func handleTake(node *gateway.Node) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req gateway.TakeRequest
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxTakeBody)).Decode(&req); err != nil || req.Session == "" {
			http.Error(w, "bad request body", http.StatusBadRequest)
			return
		}
		e, err := node.TakeSession(r.Context(), req)
		switch {
		case err == nil:
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(e)
		case errors.Is(err, gateway.ErrUnknownSession):
			http.Error(w, err.Error(), http.StatusNotFound)
		case errors.Is(err, gateway.ErrTokenMismatch):
			http.Error(w, err.Error(), http.StatusForbidden)
		case errors.Is(err, gateway.ErrClosed):
			http.Error(w, err.Error(), http.StatusConflict)
		default:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
}

// httpPeers is gateway.Peers over the admin endpoints of the live
// gateway nodes of the registry.
type httpPeers struct {
	self   string
	ring   *registry.LocalRing
	token  string
	client *http.Client
	log    *slog.Logger
}

var _ gateway.Peers = (*httpPeers)(nil)

// Take implements gateway.Peers: it asks every other live gateway node,
// draining ones included (a drain may be handing the session on), at
// once, and returns the first export. ctx bounds the whole call.
func (p *httpPeers) Take(ctx context.Context, req gateway.TakeRequest) (*gateway.SessionExport, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("gateway: take session %s: %w", req.Session, err)
	}
	var nodes []registry.Node
	for _, n := range p.ring.View().Nodes() {
		if n.Name != p.self {
			nodes = append(nodes, n)
		}
	}
	if len(nodes) == 0 {
		return nil, fmt.Errorf("%w: %s: no other gateway node", gateway.ErrUnknownSession, req.Session)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		node string
		e    *gateway.SessionExport
		err  error
	}
	answers := make(chan answer, len(nodes))
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e, err := p.take(ctx, n, body)
			answers <- answer{node: n.Name, e: e, err: err}
		}()
	}
	go func() { wg.Wait(); close(answers) }()
	var (
		refused bool
		errs    []error
	)
	for a := range answers {
		switch {
		case a.err == nil:
			// The holder answered; the others are not waited for.
			return a.e, nil
		case errors.Is(a.err, gateway.ErrTokenMismatch):
			refused = true
		case errors.Is(a.err, gateway.ErrUnknownSession):
		default:
			errs = append(errs, a.err)
		}
	}
	switch {
	case refused:
		return nil, fmt.Errorf("gateway: take session %s: %w", req.Session, gateway.ErrTokenMismatch)
	case len(errs) > 0:
		// A node that did not answer may be the holder (dead, or cut
		// off): the session is lost, but not known to be unknown.
		return nil, fmt.Errorf("gateway: take session %s: %w", req.Session, errors.Join(errs...))
	}
	return nil, fmt.Errorf("%w: %s: no gateway node holds it", gateway.ErrUnknownSession, req.Session)
}

// take asks one node.
func (p *httpPeers) take(ctx context.Context, n registry.Node, body []byte) (*gateway.SessionExport, error) {
	addr := n.Labels[adminapi.LabelAdmin]
	if addr == "" {
		addr = n.HTTPAddr
	}
	if addr == "" {
		return nil, fmt.Errorf("gateway node %s publishes no admin address", n.Name)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+takeSessionPath, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("gateway node %s: %w", n.Name, err)
	}
	req.Header.Set("Content-Type", "application/json")
	adminauth.Set(req, p.token)
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("gateway node %s: %w", n.Name, err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		var e gateway.SessionExport
		if err := json.NewDecoder(io.LimitReader(resp.Body, maxHandoffBody)).Decode(&e); err != nil {
			return nil, fmt.Errorf("gateway node %s: session export: %w", n.Name, err)
		}
		return &e, nil
	case http.StatusNotFound:
		return nil, gateway.ErrUnknownSession
	case http.StatusForbidden:
		return nil, gateway.ErrTokenMismatch
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return nil, fmt.Errorf("gateway node %s: %s: status %d: %s", n.Name, takeSessionPath, resp.StatusCode, bytes.TrimSpace(msg))
}

// setupTakeover serves the holder's endpoint and gives node its peers:
// the live gateway nodes of the registry, reached with the admin token.
// Without a token no admin request is served anywhere, so there is no
// takeover: a RESUME on another node gets op 9, as before.
func setupTakeover(ctx context.Context, b *wiring.Builder, node *gateway.Node, log *slog.Logger) error {
	if b.AdminToken == "" {
		log.Warn("no admin token: RESUME works only on the gateway node holding the session")
		return nil
	}
	ring, err := wiring.Ring(ctx, b.Seams, b.Registry, registry.RoleGateway, registry.LocalRingConfig{Logger: b.Logger.With("component", "gateway-ring")})
	if err != nil {
		return err
	}
	b.HandleAdmin("POST "+takeSessionPath, handleTake(node))
	node.SetPeers(&httpPeers{self: b.Config.Node, ring: ring, token: b.AdminToken, client: &http.Client{}, log: log})
	return nil
}
