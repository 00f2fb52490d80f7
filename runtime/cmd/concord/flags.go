package main

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/concord-chat/concord/runtime/permissions"
	"github.com/concord-chat/concord/runtime/platform"
)

// envName is a flag's environment fallback: --data-dir → CONCORD_DATA_DIR.
func envName(flag string) string {
	return "CONCORD_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// bindPlatformFlags registers the flags shared by dev and serve; each
// default comes from its environment variable when set.
func bindPlatformFlags(fs *pflag.FlagSet, cfg *platform.Config, logFormat, logLevel *string) {
	str := func(p *string, name, def, usage string) {
		if v, ok := os.LookupEnv(envName(name)); ok {
			def = v
		}
		fs.StringVar(p, name, def, fmt.Sprintf("%s (env %s)", usage, envName(name)))
	}
	num := func(p *int, name string, def int, usage string) {
		if v, ok := os.LookupEnv(envName(name)); ok {
			if n, err := strconv.Atoi(v); err == nil {
				def = n
			}
		}
		fs.IntVar(p, name, def, fmt.Sprintf("%s (env %s)", usage, envName(name)))
	}
	d := platform.DefaultConfig()
	str(&cfg.HTTP, "http", d.HTTP, "listen address for REST, the gateway, /metrics, /healthz and /readyz")
	str(&cfg.DataDir, "data-dir", d.DataDir, "directory for embedded data and the server key")
	str(&cfg.Store, "store", "", "storage backend: pebble:DIR (default pebble:<data-dir>/store) or cassandra://host:port/keyspace")
	str(&cfg.EventLog, "eventlog", d.EventLog, "event log: mem or kafka://host:port")
	str(&cfg.Redis, "redis", d.Redis, "counters backend: mem or redis://host:port")
	str(&cfg.Registry, "registry", d.Registry, "registry: embedded or etcd://host:port[,host:port...] (serve: a /prefix path sets the key prefix, default /concord/)")
	str(&cfg.Node, "node", d.Node, "node name in the registry and in gateway sessions")
	str(&cfg.PublicURL, "public-url", "", "gateway URL given to clients (ws://host:port/gateway); empty derives it from the request")
	str(&cfg.ServerKey, "server-key", "", "token signing key (>= 32 bytes); empty uses <data-dir>/server.key")
	str(&cfg.AdminToken, "admin-token", "", "bearer token /admin/... requires (Authorization: Bearer or X-Concord-Admin-Token); dev: empty turns /admin off; serve: empty derives it from the server key")
	bindCredentialFlags(fs, cfg)
	bindServingFlags(fs, &cfg.Serving)
	num(&cfg.Worker, "worker", 0, "snowflake worker id (0..31); serve without --worker and --process claims a free pair (--snowflake-id)")
	num(&cfg.Process, "process", 0, "snowflake process id (0..31); see --worker")
	num(&cfg.PermissionsShadowEvery, "permissions-shadow-every", permissions.DefaultShadowEvery,
		"recompute 1 in N fan-out and read permission decisions from scratch and count disagreements in concord_permissions_shadow_disagreements_total (negative disables)")
	str(logFormat, "log-format", "text", "log format: text or json")
	str(logLevel, "log-level", "info", "log level: debug, info, warn or error")
}

// newLogger builds the process logger from the log flags.
func newLogger(format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	default:
		return nil, fmt.Errorf("--log-format must be text or json, got %q", format)
	}
}
