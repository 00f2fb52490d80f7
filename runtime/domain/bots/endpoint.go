package bots

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/egress"
)

// endpointURLError is a 50035 naming interactions_endpoint_url.
func endpointURLError(msg string) *APIError {
	return FormError("interactions_endpoint_url", "APPLICATION_INTERACTIONS_ENDPOINT_URL_INVALID", msg)
}

// checkEndpointURL parses raw and, unless private endpoints are allowed,
// refuses URLs whose host is or resolves to a loopback, private,
// link-local, unspecified or otherwise non-public address. The egress
// client re-checks at connect time (DNS may change in between): this check
// only makes the error immediate and clear.
func (h *Handler) checkEndpointURL(ctx context.Context, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || len(raw) > 512 {
		return nil, endpointURLError("The URL must be an absolute http or https URL without credentials.")
	}
	if h.cfg.AllowPrivateEndpoints {
		return u, nil
	}
	host := u.Hostname()
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		ips, err := h.deps.Resolver.LookupIPAddr(rctx, host)
		cancel()
		if err != nil || len(ips) == 0 {
			return nil, endpointURLError("The URL's host does not resolve.")
		}
		for _, ip := range ips {
			if a, ok := netip.AddrFromSlice(ip.IP); ok {
				addrs = append(addrs, a.Unmap())
			}
		}
	}
	for _, a := range addrs {
		if !publicAddr(a) {
			return nil, endpointURLError(fmt.Sprintf("The URL resolves to a non-public address (%s).", a))
		}
	}
	return u, nil
}

// publicAddr reports whether a is an address egress may connect to: the
// same deny list the egress client and proxy enforce at connect time
// (egress.Denied), checked early so the owner gets a clear 50035.
func publicAddr(a netip.Addr) bool {
	_, denied := egress.Denied(a)
	return !denied
}

// endpointReply is what an interactions endpoint answered.
type endpointReply struct {
	status int
	body   []byte
}

// post sends one signed POST of body to rawURL. Redirects, oversized
// answers and transport failures are errors wrapping ErrEndpoint; forge
// signs with a fresh random key instead of the application's.
func (h *Handler) post(ctx context.Context, a Application, rawURL string, body []byte, forge bool) (endpointReply, error) {
	priv, err := h.keys.privateKey(a)
	if err != nil {
		return endpointReply{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if forge {
		priv = forgedKey(priv)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rawURL, bytes.NewReader(body))
	if err != nil {
		return endpointReply{}, fmt.Errorf("%w: build request: %w", ErrEndpoint, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Concord-Interactions/1.0")
	signRequest(req, priv, h.cfg.Clock.Now(), body)
	resp, err := h.deps.Egress.Do(req)
	if err != nil {
		return endpointReply{}, fmt.Errorf("%w: %w", ErrEndpoint, err)
	}
	defer resp.Body.Close()
	if resp.Request != nil && resp.Request.URL != nil && resp.Request.URL.String() != req.URL.String() {
		return endpointReply{}, fmt.Errorf("%w: redirected to %s", ErrEndpoint, resp.Request.URL.Redacted())
	}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		return endpointReply{}, fmt.Errorf("%w: answered with redirect %d", ErrEndpoint, resp.StatusCode)
	}
	limit := h.cfg.MaxEndpointResponseBytes
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return endpointReply{}, fmt.Errorf("%w: read answer: %w", ErrEndpoint, err)
	}
	if int64(len(b)) > limit {
		return endpointReply{}, fmt.Errorf("%w: answer over %d bytes", ErrEndpoint, limit)
	}
	return endpointReply{status: resp.StatusCode, body: b}, nil
}

// forgedKey returns a key that is not priv: the platform's PING with a
// forged signature, which a correct endpoint must refuse.
func forgedKey(priv ed25519.PrivateKey) ed25519.PrivateKey {
	seed := append([]byte(nil), priv.Seed()...)
	seed[0] ^= 0xff
	return ed25519.NewKeyFromSeed(seed)
}

// verifyEndpoint checks a new interactions endpoint URL as Discord does:
// a signed PING must be answered 200 {"type":1}, and a PING with a forged
// signature must be refused with 401.
func (h *Handler) verifyEndpoint(ctx context.Context, a Application, raw string) error {
	u, err := h.checkEndpointURL(ctx, raw)
	if err != nil {
		return err
	}
	id, err := h.deps.IDs.Next()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	ping, _ := json.Marshal(map[string]any{
		"id": id, "application_id": a.ID, "type": 1, "token": "ping", "version": 1,
		"user": nil, "data": nil,
	})
	vctx, cancel := context.WithTimeout(ctx, h.cfg.AckWindow)
	defer cancel()
	rep, err := h.post(vctx, a, u.String(), ping, false)
	if err != nil {
		return endpointURLError(endpointReason(err))
	}
	var pong struct {
		Type int `json:"type"`
	}
	if rep.status != http.StatusOK || json.Unmarshal(rep.body, &pong) != nil || pong.Type != 1 {
		return endpointURLError("The specified interactions endpoint URL could not be verified: PING was not answered with 200 {\"type\":1}.")
	}
	rep, err = h.post(vctx, a, u.String(), ping, true)
	if err != nil {
		return endpointURLError(endpointReason(err))
	}
	if rep.status != http.StatusUnauthorized {
		return endpointURLError("The specified interactions endpoint URL could not be verified: a request with an invalid signature was answered " + strconv.Itoa(rep.status) + ", not 401.")
	}
	return nil
}

// endpointReason turns a delivery error into a message for the owner.
func endpointReason(err error) string {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout(), errors.Is(err, context.DeadlineExceeded):
		return "The specified interactions endpoint URL did not answer in time."
	default:
		return "The specified interactions endpoint URL could not be verified: " + err.Error()
	}
}

// deliverHTTP posts an interaction to the application's endpoint and
// applies an inline answer (200 with a callback body). A transport error
// or a 5xx is retried once while the acknowledgement window is open; a
// 202 means the bot will call /callback itself.
func (h *Handler) deliverHTTP(ctx context.Context, a Application, in Interaction, payload []byte) {
	deadline := in.CreatedAt.Add(h.cfg.AckWindow)
	ctx, cancel := context.WithTimeout(ctx, h.cfg.AckWindow)
	defer cancel()
	log := h.log.With("application_id", a.ID, "interaction_id", in.ID)
	for attempt := 0; attempt < 2; attempt++ {
		if attempt > 0 {
			if !h.cfg.Clock.Now().Before(deadline) {
				return
			}
			h.metrics.deliveries.WithLabelValues("http", "retried").Inc()
		}
		rep, err := h.post(ctx, a, a.InteractionsEndpointURL, payload, false)
		if err != nil || rep.status >= 500 {
			log.Warn("interaction delivery failed", "attempt", attempt+1, "status", rep.status, "err", err)
			if errors.Is(err, ErrEndpoint) && rep.status == 0 && isPolicyError(err) {
				break
			}
			continue
		}
		switch {
		case rep.status == http.StatusOK && len(bytes.TrimSpace(rep.body)) > 0:
			h.metrics.deliveries.WithLabelValues("http", "ok").Inc()
			if _, err := h.respond(ctx, in.ID, rep.body); err != nil {
				log.Warn("inline interaction response refused", "err", err)
			}
		case rep.status == http.StatusOK || rep.status == http.StatusAccepted || rep.status == http.StatusNoContent:
			h.metrics.deliveries.WithLabelValues("http", "ok").Inc()
		default:
			log.Warn("interaction endpoint refused the interaction", "status", rep.status)
			h.metrics.deliveries.WithLabelValues("http", "failed").Inc()
		}
		return
	}
	h.metrics.deliveries.WithLabelValues("http", "failed").Inc()
}

// isPolicyError reports errors a retry cannot fix (redirects, size).
func isPolicyError(err error) bool {
	var ue *url.Error
	return !errors.As(err, &ue)
}
