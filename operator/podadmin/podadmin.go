// Package podadmin reaches Concord pods through their admin HTTP endpoint
// (the pod IP and admin port): it drains gateways and SFUs, reads session
// counts and voice loads, and collects per-guild statistics from guild nodes.
// It implements fleet.Drainer, fleet.VoiceLoads and fleet.GuildStats.
//
// The admin port is the pod's container port named "admin", else "http".
// Every request carries the cluster's admin token (token.go).
// The endpoints:
//
//	POST /admin/drain        body fleet.DrainRequest  → 200 fleet.DrainState (or 204)
//	GET  /admin/drain                                 → 200 fleet.DrainState
//	GET  /admin/voice/load                            → 200 fleet.VoiceLoad
//	GET  /admin/guilds                                → 200 []fleet.GuildSample
package podadmin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
	"github.com/concord-chat/concord/operator/fleet"
	"github.com/concord-chat/concord/runtime/edge/adminauth"
)

// ErrNoAddress is returned for a pod without an IP yet.
var ErrNoAddress = errors.New("podadmin: pod has no IP")

// Config configures the client.
type Config struct {
	// DefaultPort is the admin port when a pod declares no container port
	// named "admin" or "http" (default 8080).
	DefaultPort int
	// Timeout of one request (default 5s).
	Timeout time.Duration
	// Reader lists guild pods for GuildStats (required for it) and reads
	// each pod's ConcordCluster and server key secret, from which the
	// admin token every request carries is derived (token.go). Without
	// it requests carry no token.
	Reader client.Reader
}

// Client talks to pods' admin endpoints.
type Client struct {
	cfg  Config
	http *http.Client
}

var (
	_ fleet.Drainer    = (*Client)(nil)
	_ fleet.VoiceLoads = (*Client)(nil)
	_ fleet.GuildStats = (*Client)(nil)
)

// New validates cfg, fills its defaults and returns a Client.
func New(cfg Config) (*Client, error) {
	if cfg.DefaultPort == 0 {
		cfg.DefaultPort = 8080
	}
	if cfg.DefaultPort < 1 || cfg.DefaultPort > 65535 {
		return nil, fmt.Errorf("podadmin: invalid port %d", cfg.DefaultPort)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	return &Client{cfg: cfg, http: &http.Client{Timeout: cfg.Timeout}}, nil
}

// URL is the admin URL of path on a pod.
func (c *Client) URL(p *corev1.Pod, path string) (string, error) {
	if p.Status.PodIP == "" {
		return "", fmt.Errorf("%w: %s", ErrNoAddress, p.Name)
	}
	port, named := c.cfg.DefaultPort, ""
	for _, ct := range p.Spec.Containers {
		for _, cp := range ct.Ports {
			if cp.Name == "admin" || (cp.Name == "http" && named != "admin") {
				port, named = int(cp.ContainerPort), cp.Name
			}
		}
	}
	return "http://" + p.Status.PodIP + ":" + strconv.Itoa(port) + path, nil
}

func (c *Client) do(ctx context.Context, method string, p *corev1.Pod, path string, in, out any) error {
	u, err := c.URL(p, path)
	if err != nil {
		return err
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("podadmin: encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	token, err := c.token(ctx, p)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return fmt.Errorf("podadmin: %w", err)
	}
	adminauth.Set(req, token)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("podadmin: %s %s: %w", method, u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("podadmin: %s %s: %s: %s", method, u, resp.Status, bytes.TrimSpace(msg))
	}
	if resp.StatusCode == http.StatusNoContent {
		return errNoContent
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("podadmin: decode %s: %w", u, err)
	}
	return nil
}

// errNoContent marks a 2xx answer without a body.
var errNoContent = errors.New("podadmin: no content")

// Drain posts a drain request to the pod; it is idempotent on the pod side.
// A pod answering 204 No Content accepted the drain without reporting its
// state (State then tells progress).
func (c *Client) Drain(ctx context.Context, p *corev1.Pod, req fleet.DrainRequest) (fleet.DrainState, error) {
	var st fleet.DrainState
	err := c.do(ctx, http.MethodPost, p, "/admin/drain", req, &st)
	if errors.Is(err, errNoContent) {
		return fleet.DrainState{Draining: true, Sessions: -1}, nil
	}
	return st, err
}

// State reads the pod's sessions and drain state.
func (c *Client) State(ctx context.Context, p *corev1.Pod) (fleet.DrainState, error) {
	var st fleet.DrainState
	err := c.do(ctx, http.MethodGet, p, "/admin/drain", nil, &st)
	return st, err
}

// VoiceLoad reads an SFU's load.
func (c *Client) VoiceLoad(ctx context.Context, p *corev1.Pod) (fleet.VoiceLoad, error) {
	var l fleet.VoiceLoad
	err := c.do(ctx, http.MethodGet, p, "/admin/voice/load", nil, &l)
	return l, err
}

// GuildStats collects the per-guild samples of every ready guild node of a
// cluster (the guild StatefulSet and dedicated guild nodes). Nodes that do
// not answer are skipped; an error is returned only when none answers.
func (c *Client) GuildStats(ctx context.Context, ck fleet.ClusterKey) ([]fleet.GuildSample, error) {
	if c.cfg.Reader == nil {
		return nil, errors.New("podadmin: GuildStats needs Config.Reader")
	}
	var pods corev1.PodList
	if err := c.cfg.Reader.List(ctx, &pods, client.InNamespace(ck.Namespace),
		client.MatchingLabels{concordv1.LabelCluster: ck.Name, concordv1.LabelRole: concordv1.RoleGuild}); err != nil {
		return nil, fmt.Errorf("podadmin: list guild pods: %w", err)
	}
	var out []fleet.GuildSample
	var lastErr error
	asked, answered := 0, 0
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.PodIP == "" || !p.DeletionTimestamp.IsZero() {
			continue
		}
		asked++
		var samples []fleet.GuildSample
		if err := c.do(ctx, http.MethodGet, p, "/admin/guilds", nil, &samples); err != nil {
			lastErr = err
			continue
		}
		answered++
		for j := range samples {
			if samples[j].Pod == "" {
				samples[j].Pod = p.Name
			}
			if samples[j].Node == "" {
				samples[j].Node = p.Name
			}
		}
		out = append(out, samples...)
	}
	if asked > 0 && answered == 0 {
		return nil, fmt.Errorf("podadmin: no guild node answered: %w", lastErr)
	}
	return out, nil
}
