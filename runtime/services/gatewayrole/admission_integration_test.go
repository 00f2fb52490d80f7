//go:build integration

package gatewayrole

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	rediscounters "github.com/concord-chat/concord/runtime/adapters/counters/redis"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/config"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/edge/admission"
	"github.com/concord-chat/concord/runtime/edge/gateway"
)

// fakeIdentify answers every identify for one user.
type fakeIdentify struct {
	gateway.Backend
	user snowflake.ID
	bot  bool
}

func (f *fakeIdentify) Identify(context.Context, string, event.Session) (event.Ready, error) {
	return event.Ready{UserID: f.user, Bot: f.bot}, nil
}

// TestIdentifyBotCountersRedis: two gateway nodes counting on the same
// Redis count a bot's identifies in one bucket: max_concurrency 1 admits
// the first and refuses the second on the other node with op 9.
func TestIdentifyBotCountersRedis(t *testing.T) {
	addr := os.Getenv("CONCORD_TEST_REDIS")
	if addr == "" {
		t.Fatal("CONCORD_TEST_REDIS is not set: run `make test`, or start a server with `hack/redis/start.sh` and set CONCORD_TEST_REDIS=127.0.0.1:6390")
	}
	cfg, err := config.Config{Identify: config.Identify{Concurrency: 1}}.Complete()
	if err != nil {
		t.Fatal(err)
	}
	prefix := fmt.Sprintf("identify-test-%x:", rand.Uint64())
	node := func(bot *fakeIdentify) *admission.Admission {
		c, err := rediscounters.New(context.Background(), rediscounters.Config{Addr: addr, Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		a, err := newAdmission(cfg, bot, c, admission.Config{}, prometheus.NewRegistry(), slog.Default())
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	ctx := context.Background()
	a1, a2 := node(&fakeIdentify{user: 4242, bot: true}), node(&fakeIdentify{user: 4242, bot: true})
	if _, err := a1.Identify(ctx, "t", event.Session{}); err != nil {
		t.Fatalf("first bot identify: %v", err)
	}
	if _, err := a2.Identify(ctx, "t", event.Session{}); !errors.Is(err, gateway.ErrIdentifyRateLimited) {
		t.Fatalf("second bot identify on the other node within 5 s: %v, want ErrIdentifyRateLimited", err)
	}
}
