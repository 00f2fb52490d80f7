package main

import (
	"slices"
	"testing"

	"github.com/spf13/pflag"

	"github.com/concord-chat/concord/runtime/config"
)

// parseConfig binds the shared flags on a fresh flag set and parses args.
func parseConfig(t *testing.T, args ...string) config.Config {
	t.Helper()
	fs := pflag.NewFlagSet("dev", pflag.ContinueOnError)
	var cfg config.Config
	var logFormat, logLevel string
	bindConfigFlags(fs, &cfg, &logFormat, &logLevel)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// --trusted-proxies takes a comma-separated list, from the flag or from
// CONCORD_TRUSTED_PROXIES (the operator's way), the flag winning; unset,
// nobody is trusted; a bad entry fails the configuration.
func TestTrustedProxiesFlag(t *testing.T) {
	if got := parseConfig(t).Serving.TrustedProxies; len(got) != 0 {
		t.Fatalf("default trusted proxies %q, want none", got)
	}
	t.Setenv("CONCORD_TRUSTED_PROXIES", "10.0.0.0/8,192.0.2.7")
	if got := parseConfig(t).Serving.TrustedProxies; !slices.Equal(got, []string{"10.0.0.0/8", "192.0.2.7"}) {
		t.Fatalf("from the environment: %q", got)
	}
	cfg := parseConfig(t, "--trusted-proxies=127.0.0.1,fd00::/8")
	if got := cfg.Serving.TrustedProxies; !slices.Equal(got, []string{"127.0.0.1", "fd00::/8"}) {
		t.Fatalf("from the flag over the environment: %q", got)
	}
	if _, err := cfg.Complete(); err != nil {
		t.Fatalf("valid list refused: %v", err)
	}
	if _, err := parseConfig(t, "--trusted-proxies=lb.internal").Complete(); err == nil {
		t.Fatal("a host name was accepted as a trusted proxy")
	}
}
