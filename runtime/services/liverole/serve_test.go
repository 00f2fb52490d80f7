package liverole_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	userstore "github.com/concord-chat/concord/runtime/adapters/store/pebble"
	"github.com/concord-chat/concord/runtime/config"
	"github.com/concord-chat/concord/runtime/services/liverole"
)

// clusterRegistry stands for etcd: a role built with a registry is in
// `concord serve`. Refusing the embedded backends happens before any
// call to it.
type clusterRegistry struct{ registry.Registry }

// TestServeRefusesEmbeddedBackends: in `concord serve` the backends of
// every live role refuse the embedded ones (one process's) with an error
// naming the flag and what to use, instead of running split roles that
// never meet. The process opens them for its live roles (OpenBackends)
// before building any.
func TestServeRefusesEmbeddedBackends(t *testing.T) {
	users, err := userstore.New(userstore.Config{Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer users.Close()
	for _, r := range liverole.Roles {
		cfg, err := config.Config{Roles: []string{r.Name}, DataDir: t.TempDir()}.Complete()
		if err != nil {
			t.Fatal(err)
		}
		_, closeAll, err := liverole.OpenBackends(context.Background(), liverole.BackendsConfig{Config: cfg, Logger: slog.New(slog.DiscardHandler),
			Roles: []string{r.Name}, Registry: clusterRegistry{}})
		want := []string{"=mem", "kafka://"}
		if r.Name == liverole.NameRelay {
			// A relay node's one backend is the board: etcd.
			want = []string{"want etcd"}
		}
		for _, w := range want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s on embedded backends in serve: %v, want it to say %q", r.Name, err, w)
			}
		}
		if err == nil {
			closeAll()
		}
	}
}
