package main

import (
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/concord-chat/concord/runtime/edge/httpserve"
)

// bindServingFlags registers the bounds of every HTTP listener
// (runtime/edge/httpserve); zero keeps the package's default.
func bindServingFlags(fs *pflag.FlagSet, cfg *httpserve.Config) {
	durFlag(fs, &cfg.ReadHeaderTimeout, "http-read-header-timeout", httpserve.DefaultReadHeaderTimeout, "HTTP listeners: time a request's line and headers may take")
	durFlag(fs, &cfg.ReadTimeout, "http-read-timeout", httpserve.DefaultReadTimeout, "HTTP listeners: time a request body may take (not WebSocket or streams)")
	durFlag(fs, &cfg.WriteTimeout, "http-write-timeout", httpserve.DefaultWriteTimeout, "HTTP listeners: time handling and answering a request may take (not WebSocket or streams)")
	durFlag(fs, &cfg.IdleTimeout, "http-idle-timeout", httpserve.DefaultIdleTimeout, "HTTP listeners: time a keep-alive connection may wait for its next request")
	intFlag(fs, &cfg.MaxHeaderBytes, "http-max-header-bytes", httpserve.DefaultMaxHeaderBytes, "HTTP listeners: largest request line and headers")
	intFlag(fs, &cfg.MaxConnsPerAddr, "http-max-conns-per-addr", httpserve.DefaultMaxConnsPerAddr, "HTTP listeners: open connections one remote IP may hold (WebSocket included)")
	intFlag(fs, &cfg.MaxConns, "http-max-conns", httpserve.DefaultMaxConns, "HTTP listeners: open connections in total per listener")
	var trusted []string
	if e := os.Getenv(envName("trusted-proxies")); e != "" {
		trusted = strings.Split(e, ",")
	}
	fs.StringSliceVar(&cfg.TrustedProxies, "trusted-proxies", trusted, usage("trusted-proxies",
		"HTTP listeners: load balancers and proxies (IPs or CIDRs, comma-separated) whose PROXY protocol v1/v2 header or X-Forwarded-For names the client's address, which then keys the per-address cap, rate limits and bans; a PROXY header from anyone else closes the connection; empty trusts nobody"))
}
