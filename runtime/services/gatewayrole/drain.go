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
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/base/adminapi"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/edge/adminauth"
	"github.com/concord-chat/concord/runtime/edge/gateway"
	"github.com/concord-chat/concord/runtime/services/wiring"
)

// The gateway role's drain, as the operator drives it (operator/podadmin):
//
//	POST /admin/drain           adminapi.DrainRequest → 200 adminapi.DrainState (idempotent)
//	GET  /admin/drain                        → 200 adminapi.DrainState
//
// and the successor side of the session hand-off, called by the draining
// node on the successor's admin address (adminapi.DrainRequest.SuccessorAddress):
//
//	POST /admin/sessions/prepare  {"sessions": [event.Session]}          → 204
//	POST /admin/sessions          {"sessions": [gateway.SessionExport]}  → 204
//
// The hand-off goes over the admin endpoint, not a GatewayNode RPC: the
// operator already gives the draining pod the successor's admin address,
// the payload is the replay buffer's JSON dispatches (embedded as they
// are, no re-encoding), and the endpoint stays off the gRPC port every
// node of the cluster dials. A node that is itself draining answers 409.

// defaultDrainTimeout bounds a drain whose request has no deadline.
const defaultDrainTimeout = 2 * time.Minute

// drainer is the gateway role's drain: the same endpoints in both modes;
// only a `concord serve` node (handoff) hands its sessions to a
// successor.
type drainer struct {
	node *gateway.Node
	// reg, in `concord serve`, is where the node is marked draining.
	reg  registry.Registry
	self string
	// handoff is whether the node hands sessions to a successor; token
	// is the admin token it calls the successor with.
	handoff bool
	token   string
	log     *slog.Logger

	mu       sync.Mutex
	started  bool
	deadline time.Time
	// finished is set when the hand-off returned (or the drain without a
	// successor did).
	finished bool
	err      error
}

// routes adds the drain and, with hand-off, the successor's endpoints.
func (d *drainer) routes(mux wiring.Mux) {
	mux.Handle("POST /admin/drain", http.HandlerFunc(d.handleDrain))
	mux.Handle("GET /admin/drain", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeDrainState(w, d.state())
	}))
	if !d.handoff {
		return
	}
	mux.Handle("POST /admin/sessions/prepare", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Sessions []event.Session `json:"sessions"`
		}
		if !readBody(w, r, &body) {
			return
		}
		handoffAnswer(w, d.node.PrepareSessions(r.Context(), body.Sessions))
	}))
	mux.Handle("POST /admin/sessions", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Sessions []gateway.SessionExport `json:"sessions"`
		}
		if !readBody(w, r, &body) {
			return
		}
		handoffAnswer(w, d.node.ImportSessions(context.WithoutCancel(r.Context()), body.Sessions))
	}))
}

// ready is the drain's readiness: an error from the start of a drain, so
// the load balancer sends the node no new connection.
func (d *drainer) ready() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.started {
		return errors.New("draining")
	}
	return nil
}

// handleDrain starts the drain once; every call answers the state.
func (d *drainer) handleDrain(w http.ResponseWriter, r *http.Request) {
	var req adminapi.DrainRequest
	// An empty body (the operator's older client, curl -X POST) drains
	// without a successor.
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil && !errors.Is(err, io.EOF) {
		http.Error(w, "bad request body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if (req.Successor == "") != (req.SuccessorAddress == "") || (req.Successor != "" && req.Successor == d.self) {
		http.Error(w, "successor and successorAddress go together and name another node", http.StatusBadRequest)
		return
	}
	if req.Successor != "" && !d.handoff {
		http.Error(w, "this process hands no session to a successor (concord dev): drain without one", http.StatusBadRequest)
		return
	}
	d.start(req)
	writeDrainState(w, d.state())
}

// start takes the node out of rotation (readiness off, draining in the
// registry), refuses identifies, and hands the sessions to the successor
// in the background, or without one sends op 7 and keeps them resumable
// here. Later calls do nothing.
func (d *drainer) start(req adminapi.DrainRequest) {
	d.mu.Lock()
	if d.started {
		d.mu.Unlock()
		return
	}
	d.started = true
	d.deadline = req.Deadline
	if d.deadline.IsZero() {
		d.deadline = time.Now().Add(defaultDrainTimeout)
	}
	deadline := d.deadline
	d.mu.Unlock()

	d.node.StopIdentify()
	d.log.Info("draining", "successor", req.Successor, "deadline", deadline, "sessions", d.node.Sessions())
	go func() {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		if d.reg != nil {
			if err := d.reg.SetDraining(ctx, d.self, true); err != nil {
				d.log.Warn("mark node draining in the registry", "err", err)
			}
		}
		var err error
		if req.Successor == "" {
			err = d.node.Drain(ctx)
		} else {
			succ := &httpSuccessor{name: req.Successor, addr: req.SuccessorAddress, token: d.token, client: &http.Client{Timeout: 30 * time.Second}}
			err = d.node.HandOff(ctx, succ, gateway.HandOffOptions{ReconnectJitter: req.ReconnectJitter})
		}
		if err != nil {
			d.log.Warn("drain incomplete", "successor", req.Successor, "err", err)
		} else {
			d.log.Info("drain finished", "successor", req.Successor, "sessions", d.node.Sessions())
		}
		d.mu.Lock()
		d.finished, d.err = true, err
		d.mu.Unlock()
	}()
}

// state reports the drain: done once the hand-off finished and no
// session is left (without a successor: once no session is left), or the
// deadline passed.
func (d *drainer) state() adminapi.DrainState {
	d.mu.Lock()
	defer d.mu.Unlock()
	held := int64(d.node.Sessions())
	st := adminapi.DrainState{Draining: d.node.Draining(), Sessions: held}
	if d.started {
		st.Done = (d.finished && held == 0) || !time.Now().Before(d.deadline)
	}
	return st
}

// httpSuccessor is a gateway.Successor reached on its admin address.
type httpSuccessor struct {
	name, addr string
	token      string // the cluster's admin token
	client     *http.Client
}

var _ gateway.Successor = (*httpSuccessor)(nil)

// Name implements gateway.Successor.
func (s *httpSuccessor) Name() string { return s.name }

// Prepare implements gateway.Successor.
func (s *httpSuccessor) Prepare(ctx context.Context, sessions []event.Session) error {
	return s.post(ctx, "/admin/sessions/prepare", map[string]any{"sessions": sessions})
}

// Import implements gateway.Successor.
func (s *httpSuccessor) Import(ctx context.Context, sessions []gateway.SessionExport) error {
	return s.post(ctx, "/admin/sessions", map[string]any{"sessions": sessions})
}

func (s *httpSuccessor) post(ctx context.Context, path string, body any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("gateway: successor %s: %w", path, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+s.addr+path, bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("gateway: successor %s: %w", path, err)
	}
	req.Header.Set("Content-Type", "application/json")
	adminauth.Set(req, s.token)
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("gateway: successor %s %s: %w", s.name, path, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("gateway: successor %s %s: status %d: %s", s.name, path, resp.StatusCode, bytes.TrimSpace(msg))
	}
	return nil
}

// maxHandoffBody bounds a hand-off request: a batch of sessions with
// their replay buffers.
const maxHandoffBody = 256 << 20

// readBody decodes a JSON request body into v, answering 400 on failure.
func readBody(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxHandoffBody)).Decode(v); err != nil {
		http.Error(w, "bad request body: "+err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}

// handoffAnswer maps a hand-off error to a status.
func handoffAnswer(w http.ResponseWriter, err error) {
	switch {
	case err == nil:
		w.WriteHeader(http.StatusNoContent)
	case errors.Is(err, gateway.ErrDraining) || errors.Is(err, gateway.ErrClosed):
		http.Error(w, err.Error(), http.StatusConflict)
	default:
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

// writeDrainState answers 200 with st.
func writeDrainState(w http.ResponseWriter, st adminapi.DrainState) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(st)
}
