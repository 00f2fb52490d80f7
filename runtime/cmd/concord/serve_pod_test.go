package main

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/concord-chat/concord/runtime/app"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/config"
)

// parseServePod binds the platform and pod flags on a fresh flag set,
// parses args and applies them.
func parseServePod(t *testing.T, args ...string) (config.Config, error) {
	t.Helper()
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	var cfg config.Config
	var logFormat, logLevel string
	var pf podFlags
	bindConfigFlags(fs, &cfg, &logFormat, &logLevel)
	bindPodFlags(fs, &cfg, &pf)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return cfg, applyPodFlags(fs, &cfg, pf)
}

// The operator's environment reaches the cluster config through the
// flags' env fallbacks; without --worker/--process the pair is claimed.
func TestServePodFlagsFromEnv(t *testing.T) {
	t.Setenv("CONCORD_CLUSTER", "prod")
	t.Setenv("CONCORD_GATEWAY_POOL", "bots")
	t.Setenv("CONCORD_GATEWAY_CLIENT_CLASS", "bots")
	t.Setenv("CONCORD_GATEWAY_SESSIONS_TARGET", "50000")
	t.Setenv("CONCORD_GUILD_DEDICATED", "1234567890123")
	cfg, err := parseServePod(t)
	if err != nil {
		t.Fatal(err)
	}
	want := config.Pod{Cluster: "prod", GatewayPool: "bots", ClientClass: "bots", SessionsTarget: 50000, DedicatedGuild: snowflake.ID(1234567890123)}
	if cfg.Pod != want {
		t.Fatalf("pod config = %+v, want %+v", cfg.Pod, want)
	}
	if !cfg.SnowflakeAuto {
		t.Fatal("no --worker/--process: want the pair claimed (auto)")
	}
}

func TestServeSnowflakeID(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		auto       bool
		worker, pr int
		err        string
	}{
		{args: nil, auto: true},
		{args: []string{"--worker=3"}, worker: 3},
		{args: []string{"--process=2"}, pr: 2},
		{args: []string{"--snowflake-id=auto", "--worker=3"}, auto: true, worker: 3},
		{args: []string{"--snowflake-id=4/9"}, worker: 4, pr: 9},
		{args: []string{"--snowflake-id=4"}, err: "want auto or WORKER/PROCESS"},
		{args: []string{"--guild-dedicated=abc"}, auto: true, err: "want a guild id"},
	} {
		cfg, err := parseServePod(t, tc.args...)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: err = %v, want %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil || cfg.SnowflakeAuto != tc.auto || cfg.Worker != tc.worker || cfg.Process != tc.pr {
			t.Errorf("%v: auto %v worker %d process %d err %v; want auto %v worker %d process %d",
				tc.args, cfg.SnowflakeAuto, cfg.Worker, cfg.Process, err, tc.auto, tc.worker, tc.pr)
		}
	}
}

// serve accepts every role of the role tables (each is built through
// them) and refuses a name none of them has.
func TestServeRolesAreTheTables(t *testing.T) {
	base := func(r string) config.Config {
		return config.Config{Roles: []string{r}, Store: "cassandra://127.0.0.1:9042/concord", ServerKey: "k",
			EventLog: "kafka://127.0.0.1:9092", Registry: "etcd://127.0.0.1:2379"}
	}
	for _, r := range append([]string{"guild", "gateway", "voice"}, app.DefaultTables().Names()...) {
		if _, _, err := app.Check(base(r), app.DefaultTables()); err != nil && strings.Contains(err.Error(), "unknown role") {
			t.Fatalf("built role %s refused: %v", r, err)
		}
	}
	if _, _, err := app.Check(base("bogus"), app.DefaultTables()); err == nil || !strings.Contains(err.Error(), "unknown role") {
		t.Fatalf("--roles=bogus: %v, want an unknown role", err)
	}
}
