package liverole_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/concord-chat/concord/runtime/auth"
	"github.com/concord-chat/concord/runtime/config"
	"github.com/concord-chat/concord/runtime/lifecycle"
	"github.com/concord-chat/concord/runtime/live/liverole"
	"github.com/concord-chat/concord/runtime/registry"
	"github.com/concord-chat/concord/runtime/role"
	"github.com/concord-chat/concord/runtime/snowflake"
	userstore "github.com/concord-chat/concord/runtime/store/pebble"
)

// clusterRegistry stands for etcd: a role built with a registry is in
// `concord serve`. Refusing the embedded backends happens before any
// call to it.
type clusterRegistry struct{ registry.Registry }

// TestServeRefusesEmbeddedBackends: in `concord serve` every live role
// refuses the embedded backends (one process's) with an error naming the
// flag and what to use, instead of running split roles that never meet.
func TestServeRefusesEmbeddedBackends(t *testing.T) {
	users, err := userstore.New(userstore.Config{Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer users.Close()
	iss, err := auth.New(auth.Config{Key: bytes.Repeat([]byte("k"), 32)}, users)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := snowflake.New(snowflake.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range liverole.Roles {
		cfg, err := config.Config{Roles: []string{r.Name}, DataDir: t.TempDir()}.Complete()
		if err != nil {
			t.Fatal(err)
		}
		parts := role.Parts{Config: cfg, Logger: slog.New(slog.DiscardHandler), Registry: clusterRegistry{}, Store: users, Auth: iss, IDs: ids}
		var group lifecycle.Group
		err = role.Build(context.Background(), liverole.Roles, func(n string) bool { return n == r.Name }, parts, http.NewServeMux(), &group)
		if err == nil || !strings.Contains(err.Error(), "=mem") || !strings.Contains(err.Error(), "kafka://") {
			t.Errorf("%s on embedded backends in serve: %v", r.Name, err)
		}
		group.Stop(context.Background())
	}
}
