package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/concord-chat/concord/runtime/adapters/egress"
	"github.com/concord-chat/concord/runtime/app"
	"github.com/concord-chat/concord/runtime/edge/httpserve"
)

// egressOptions are the flags of `concord egress`.
type egressOptions struct {
	listen, ports, allowPrivate, logFormat, logLevel string
	timeout, dialTimeout                             time.Duration
	maxBytes                                         int
}

func newEgressCommand() *cobra.Command {
	var o egressOptions
	cmd := &cobra.Command{
		Use:   "egress",
		Short: "Run the egress proxy every call to a bot-chosen URL goes through",
		Long: `concord egress is the egress deployment of a cluster: an HTTP forward proxy
(CONNECT for https, absolute-form requests for http) that resolves each
destination itself, refuses loopback, private, link-local, CGNAT, metadata,
multicast and reserved addresses (and the IPv6 and IPv4-mapped forms of
them) at connect time, never follows redirects (its callers re-request
through it, checked again), and caps the time and bytes of every exchange.
Point the platform at it with --egress-proxy=http://<service>:<port>; run it
with a NetworkPolicy that lets it reach public addresses only (the Helm
chart does both).

/healthz, /readyz and /metrics are served on the same listener.`,
		Example: `  concord egress --http=0.0.0.0:8080`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runEgress(cmd.Context(), cmd, o)
		},
	}
	fs := cmd.Flags()
	strFlag(fs, &o.listen, "http", "127.0.0.1:8080", "listen address of the proxy (and /healthz, /readyz, /metrics)")
	strFlag(fs, &o.ports, "connect-ports", "443", "comma-separated ports CONNECT tunnels may reach")
	strFlag(fs, &o.allowPrivate, "egress-allow-private", "", "TESTS ONLY: comma-separated prefixes exempt from the deny list (logged at WARN); never set in production")
	durFlag(fs, &o.timeout, "egress-timeout", 10*time.Second, "bound on one request or tunnel, from connect to the last byte")
	durFlag(fs, &o.dialTimeout, "egress-dial-timeout", 5*time.Second, "bound on one connection attempt")
	intFlag(fs, &o.maxBytes, "egress-max-bytes", 8<<20, "cap on a response body (tunnels: plus 256 KiB for TLS)")
	strFlag(fs, &o.logFormat, "log-format", "text", "log format: text or json")
	strFlag(fs, &o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	return cmd
}

func runEgress(ctx context.Context, cmd *cobra.Command, o egressOptions) error {
	log, err := newLogger(o.logFormat, o.logLevel)
	if err != nil {
		return err
	}
	var ports []int
	for _, p := range strings.Split(o.ports, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil {
			return fmt.Errorf("--connect-ports: %q is not a port", p)
		}
		ports = append(ports, n)
	}
	var allow []netip.Prefix
	for _, p := range strings.Split(o.allowPrivate, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		pf, err := netip.ParsePrefix(p)
		if err != nil {
			return fmt.Errorf("--egress-allow-private: %w", err)
		}
		allow = append(allow, pf)
	}
	reg := prometheus.NewRegistry()
	px, err := egress.NewProxy(egress.ProxyConfig{
		Client: egress.Config{AllowPrivate: allow, Timeout: o.timeout, DialTimeout: o.dialTimeout,
			MaxBytes: int64(o.maxBytes), Logger: log.With("component", "egress"), Registerer: reg},
		ConnectPorts: ports,
	})
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("egress: listen %s: %w", o.listen, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(prometheus.Gatherers{reg, prometheus.DefaultGatherer}, promhttp.HandlerOpts{}))
	app.HandleHealth(mux, func() bool { return true })
	// The callers are Concord's own pods, a few addresses with many calls
	// each: a wider per-address cap than a public listener's; a forwarded
	// call may take the whole upstream timeout before its answer is written.
	serving := httpserve.Config{MaxConnsPerAddr: 4096, WriteTimeout: o.timeout + 10*time.Second, Logger: log}
	srv := httpserve.NewServer(px.Handler(mux), serving)
	fmt.Fprintf(cmd.OutOrStdout(), "Concord egress proxy is listening on http://%s\n", l.Addr())
	fmt.Fprintf(cmd.OutOrStdout(), "  Metrics:   http://%s/metrics\n", l.Addr())
	errc := make(chan error, 1)
	go func() { errc <- httpserve.Serve(srv, l, serving) }()
	select {
	case err := <-errc:
		return fmt.Errorf("egress: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("egress: shutdown: %w", err)
	}
	px.Wait()
	return nil
}
