package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/concord-chat/concord/runtime/adminauth"
	"github.com/concord-chat/concord/runtime/event"
	"github.com/concord-chat/concord/runtime/gateway"
)

// The gateway role's drain, as the operator drives it (operator/podadmin):
//
//	POST /admin/drain           drainRequest → 200 drainState (idempotent)
//	GET  /admin/drain                        → 200 drainState
//
// and the successor side of the session hand-off, called by the draining
// node on the successor's admin address (drainRequest.SuccessorAddress):
//
//	POST /admin/sessions/prepare  {"sessions": [event.Session]}          → 204
//	POST /admin/sessions          {"sessions": [gateway.SessionExport]}  → 204
//
// The hand-off goes over the admin endpoint, not a GatewayNode RPC: the
// operator already gives the draining pod the successor's admin address,
// the payload is the replay buffer's JSON dispatches (embedded as they
// are, no re-encoding), and the endpoint stays off the gRPC port every
// node of the cluster dials. A node that is itself draining answers 409.

// drainRequest is operator/fleet.DrainRequest (mirrored here so that the
// binary does not link the Kubernetes API types).
type drainRequest struct {
	Successor        string        `json:"successor"`
	SuccessorAddress string        `json:"successorAddress"`
	ReconnectJitter  time.Duration `json:"reconnectJitter"`
	Deadline         time.Time     `json:"deadline"`
}

// drainState is operator/fleet.DrainState.
type drainState struct {
	Draining bool  `json:"draining"`
	Sessions int64 `json:"sessions"`
	Done     bool  `json:"done"`
}

// defaultDrainTimeout bounds a drain whose request has no deadline.
const defaultDrainTimeout = 2 * time.Minute

// drainer is the gateway role's drain state.
type drainer struct {
	mu       sync.Mutex
	started  bool
	deadline time.Time
	// finished is set when the hand-off returned (or at once without a
	// successor).
	finished bool
	err      error
}

// drainRoutes adds the gateway role's drain and hand-off endpoints.
func (n *Node) drainRoutes(mux *http.ServeMux) {
	if n.gateway == nil {
		return
	}
	mux.HandleFunc("POST /admin/drain", n.handleDrain)
	mux.HandleFunc("GET /admin/drain", func(w http.ResponseWriter, r *http.Request) {
		writeDrainState(w, n.drainState())
	})
	mux.HandleFunc("POST /admin/sessions/prepare", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Sessions []event.Session `json:"sessions"`
		}
		if !readBody(w, r, &body) {
			return
		}
		handoffAnswer(w, n.gateway.PrepareSessions(r.Context(), body.Sessions))
	})
	mux.HandleFunc("POST /admin/sessions", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Sessions []gateway.SessionExport `json:"sessions"`
		}
		if !readBody(w, r, &body) {
			return
		}
		handoffAnswer(w, n.gateway.ImportSessions(context.WithoutCancel(r.Context()), body.Sessions))
	})
}

// handleDrain starts the drain once; every call answers the state.
func (n *Node) handleDrain(w http.ResponseWriter, r *http.Request) {
	var req drainRequest
	// An empty body (the operator's older client, curl -X POST) drains
	// without a successor.
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil && !errors.Is(err, io.EOF) {
		http.Error(w, "bad request body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if (req.Successor == "") != (req.SuccessorAddress == "") || req.Successor == n.cfg.Node {
		http.Error(w, "successor and successorAddress go together and name another node", http.StatusBadRequest)
		return
	}
	n.startDrain(req)
	writeDrainState(w, n.drainState())
}

// startDrain takes the node out of rotation (readiness off, draining in
// the registry), refuses identifies, and hands the sessions to the
// successor in the background, or without one sends op 7 and keeps them
// resumable here. Later calls do nothing.
func (n *Node) startDrain(req drainRequest) {
	d := &n.drain
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

	n.ready.Store(false)
	n.gateway.StopIdentify()
	n.log.Info("draining", "successor", req.Successor, "deadline", deadline, "sessions", n.gateway.Sessions())
	go func() {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		if err := n.reg.SetDraining(ctx, n.cfg.Node, true); err != nil {
			n.log.Warn("mark node draining in the registry", "err", err)
		}
		var err error
		if req.Successor == "" {
			err = n.gateway.Drain(ctx)
		} else {
			succ := &httpSuccessor{name: req.Successor, addr: req.SuccessorAddress, token: n.adminToken, client: &http.Client{Timeout: 30 * time.Second}}
			err = n.gateway.HandOff(ctx, succ, gateway.HandOffOptions{ReconnectJitter: req.ReconnectJitter})
		}
		if err != nil {
			n.log.Warn("drain incomplete", "successor", req.Successor, "err", err)
		} else {
			n.log.Info("drain finished", "successor", req.Successor, "sessions", n.gateway.Sessions())
		}
		d.mu.Lock()
		d.finished, d.err = true, err
		d.mu.Unlock()
	}()
}

// drainState reports the drain: done once the hand-off finished and no
// session is left (without a successor: once no session is left), or the
// deadline passed.
func (n *Node) drainState() drainState {
	d := &n.drain
	d.mu.Lock()
	defer d.mu.Unlock()
	held := int64(n.gateway.Sessions())
	st := drainState{Draining: n.gateway.Draining(), Sessions: held}
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
		return fmt.Errorf("cluster: successor %s: %w", path, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+s.addr+path, bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("cluster: successor %s: %w", path, err)
	}
	req.Header.Set("Content-Type", "application/json")
	adminauth.Set(req, s.token)
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("cluster: successor %s %s: %w", s.name, path, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("cluster: successor %s %s: status %d: %s", s.name, path, resp.StatusCode, bytes.TrimSpace(msg))
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
func writeDrainState(w http.ResponseWriter, st drainState) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(st)
}
