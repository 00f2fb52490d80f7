package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/concord-chat/concord/runtime/base/clock"
	"github.com/concord-chat/concord/runtime/config"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/domain/permissions"
)

// Every flag maps onto one field of config.Config, takes its default from
// config.Default and falls back to its environment variable, which --help
// names: --data-dir → CONCORD_DATA_DIR.

// envName is a flag's environment fallback: --data-dir → CONCORD_DATA_DIR.
func envName(flag string) string {
	return "CONCORD_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// followFaultClock starts the fault clock seam when --fault-clock-file
// is set (runtime/base/clock): fault tests move the process's wall clock
// by writing the file. Without the flag it does nothing.
func followFaultClock(ctx context.Context, cfg config.Config) error {
	if cfg.FaultClockFile == "" {
		return nil
	}
	if err := clock.Follow(ctx, cfg.FaultClockFile, 0, cfg.Logger); err != nil {
		return fmt.Errorf("--fault-clock-file: %w", err)
	}
	return nil
}

// usage appends the environment variable to a flag's help.
func usage(name, text string) string { return fmt.Sprintf("%s (env %s)", text, envName(name)) }

// strFlag registers a string flag whose default comes from its
// environment variable when set.
func strFlag(fs *pflag.FlagSet, p *string, name, def, text string) {
	if v, ok := os.LookupEnv(envName(name)); ok {
		def = v
	}
	fs.StringVar(p, name, def, usage(name, text))
}

// durFlag registers a duration flag whose default comes from its
// environment variable when set and valid.
func durFlag(fs *pflag.FlagSet, p *time.Duration, name string, def time.Duration, text string) {
	if v, ok := os.LookupEnv(envName(name)); ok {
		if d, err := time.ParseDuration(v); err == nil {
			def = d
		}
	}
	fs.DurationVar(p, name, def, usage(name, text))
}

// intFlag registers an int flag whose default comes from its environment
// variable when set and valid.
func intFlag(fs *pflag.FlagSet, p *int, name string, def int, text string) {
	if v, ok := os.LookupEnv(envName(name)); ok {
		if n, err := strconv.Atoi(v); err == nil {
			def = n
		}
	}
	fs.IntVar(p, name, def, usage(name, text))
}

// int64Flag registers an int64 flag whose default comes from its
// environment variable when set and valid.
func int64Flag(fs *pflag.FlagSet, p *int64, name string, def int64, text string) {
	if v, ok := os.LookupEnv(envName(name)); ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			def = n
		}
	}
	fs.Int64Var(p, name, def, usage(name, text))
}

// floatFlag registers a float flag whose default comes from its
// environment variable when set and valid.
func floatFlag(fs *pflag.FlagSet, p *float64, name string, def float64, text string) {
	if v, ok := os.LookupEnv(envName(name)); ok {
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			def = f
		}
	}
	fs.Float64Var(p, name, def, usage(name, text))
}

// boolFlag registers a bool flag whose default comes from its environment
// variable when set and valid.
func boolFlag(fs *pflag.FlagSet, p *bool, name string, def bool, text string) {
	if v, ok := os.LookupEnv(envName(name)); ok {
		if b, err := strconv.ParseBool(v); err == nil {
			def = b
		}
	}
	fs.BoolVar(p, name, def, usage(name, text))
}

// bindConfigFlags registers the flags dev and serve share, onto cfg.
func bindConfigFlags(fs *pflag.FlagSet, cfg *config.Config, logFormat, logLevel *string) {
	d := config.Default()
	strFlag(fs, &cfg.HTTP, "http", d.HTTP, "listen address for REST, the gateway, /metrics, /healthz and /readyz")
	strFlag(fs, &cfg.DataDir, "data-dir", d.DataDir, "directory for embedded data and the server key")
	strFlag(fs, &cfg.Store, "store", "", "storage backend: pebble:DIR (default pebble:<data-dir>/store) or cassandra://host:port/keyspace")
	strFlag(fs, &cfg.EventLog, "eventlog", d.EventLog, "event log: mem or kafka://host:port")
	strFlag(fs, &cfg.Redis, "redis", d.Redis, "counters backend: mem or redis://host:port")
	strFlag(fs, &cfg.Registry, "registry", d.Registry, "registry: embedded or etcd://host:port[,host:port...] (serve: a /prefix path sets the key prefix, default /concord/)")
	strFlag(fs, &cfg.Node, "node", d.Node, "node name in the registry and in gateway sessions")
	strFlag(fs, &cfg.PublicURL, "public-url", "", "gateway URL given to clients (ws://host:port/gateway); empty derives it from the request")
	strFlag(fs, &cfg.FaultClockFile, "fault-clock-file", "", "FOR FAULT TESTING ONLY: move this process's wall clock (snowflake ids, store write timestamps, expiry) by the offset in this file (+45s, -45s; absent is 0), re-read every 100 ms; empty (the default) leaves the clock alone")
	var media []string
	if e := os.Getenv(envName("web-media-origins")); e != "" {
		media = strings.Split(e, ",")
	}
	fs.StringSliceVar(&cfg.WebMediaOrigins, "web-media-origins", media, usage("web-media-origins",
		"origins besides this one that the web client may play live streams' stream_url from (https://media.example.com, https://*.cdn.example.com); empty: this origin only"))
	strFlag(fs, &cfg.ServerKey, "server-key", "", "token signing key (>= 32 bytes); empty uses <data-dir>/server.key")
	strFlag(fs, &cfg.AdminToken, "admin-token", "", "bearer token /admin/... requires (Authorization: Bearer or X-Concord-Admin-Token); dev: empty turns /admin off; serve: empty derives it from the server key")
	strFlag(fs, &cfg.EgressProxy, "egress-proxy", "", "send every call to a bot-chosen URL (interaction endpoints, webhooks) through this egress proxy (concord egress, http://host:port); empty checks and dials in-process")
	strFlag(fs, &cfg.Objects, "objects", "", "attachment store: dir:PATH (default dir:<data-dir>/objects) or s3://KEY:SECRET@host:port/bucket[/prefix] (s3+http:// without TLS)")
	int64Flag(fs, &cfg.MaxFileBytes, "max-file-bytes", 25<<20, "largest uploaded file accepted, in bytes (Discord: 25 MiB)")
	bindCredentialFlags(fs, &cfg.Credentials)
	bindServingFlags(fs, &cfg.Serving)
	bindLiveFlags(fs, &cfg.Live)
	bindVoiceFlags(fs, &cfg.Voice)
	intFlag(fs, &cfg.PermissionsShadowEvery, "permissions-shadow-every", permissions.DefaultShadowEvery,
		"recompute 1 in N fan-out and read permission decisions from scratch and count disagreements in concord_permissions_shadow_disagreements_total (negative disables)")
	intFlag(fs, &cfg.GuildMetricsTop, "guild-metrics-top", guild.DefaultTopGuilds,
		"guild nodes: give the N busiest guilds (operations dispatched and queued, re-ranked every 5 s) labelled series concord_guild_top_*{guild} (negative disables)")
	intFlag(fs, &cfg.RelayThreshold, "relay-threshold", guild.DefaultSliceThreshold,
		"guild nodes: a guild with more online sessions hands them to relays of at most this many each, which filter them themselves")
	intFlag(fs, &cfg.DevRelays, "dev-relays", 7, "concord dev: in-process relays that take the sessions of guilds above --relay-threshold")
	intFlag(fs, &cfg.Worker, "worker", 0, "snowflake worker id (0..31); serve without --worker and --process claims a free pair (--snowflake-id)")
	intFlag(fs, &cfg.Process, "process", 0, "snowflake process id (0..31); see --worker")
	intFlag(fs, &cfg.Identify.Concurrency, "identify-concurrency", d.Identify.Concurrency,
		"bots' max_concurrency: identifies per 5 s per shard_id % max_concurrency (1,000 per 24 h per bot), counted in --redis")
	durFlag(fs, &cfg.Entitlements.TTL, "entitlement-ttl", d.Entitlements.TTL,
		"bot entitlement lease TTL, renewed every half of it: the longest a revocation whose push was lost goes unapplied while the bot store answers")
	durFlag(fs, &cfg.Entitlements.Grace, "entitlement-grace", d.Entitlements.Grace,
		"how long bot sessions keep running on entitlements that cannot be renewed (bot store or registry down) before they close; new bot identifies are refused meanwhile")
	strFlag(fs, logFormat, "log-format", "text", "log format: text or json")
	strFlag(fs, logLevel, "log-level", "info", "log level: debug, info, warn or error")
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
