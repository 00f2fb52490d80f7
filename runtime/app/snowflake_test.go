package app

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	etcdreg "github.com/concord-chat/concord/runtime/adapters/registry/etcd"
)

// snowflakeEtcd starts an embedded etcd and returns a function opening a
// registry client on it, as one more process would.
func snowflakeEtcd(t *testing.T) func() *etcdreg.Registry {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stop, ep, err := etcdreg.StartEmbedded(ctx, t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return func() *etcdreg.Registry {
		r, err := etcdreg.New(etcdreg.Config{Endpoints: []string{ep}, LeaseTTL: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}
}

func snowflakeCfg(node string, auto bool) Config {
	return Config{
		Node:          node,
		Store:         "cassandra://shared/ks",
		Logger:        slog.New(slog.DiscardHandler),
		LeaseTTL:      2 * time.Second,
		SnowflakeAuto: auto,
	}
}

// Two nodes with --snowflake-id=auto get different pairs; a pair comes
// free again once its holder's lease ended, and the next node takes it.
func TestSnowflakeAutoClaimsDistinctPairsAndReusesExpired(t *testing.T) {
	open := snowflakeEtcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	regA, regB := open(), open()
	a, _, err := claimSnowflake(ctx, regA, snowflakeCfg("node-a", true))
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := claimSnowflake(ctx, regB, snowflakeCfg("node-b", true))
	if err != nil {
		t.Fatal(err)
	}
	pa := snowflakeLabel(a.Worker, a.Process)
	pb := snowflakeLabel(b.Worker, b.Process)
	if pa == pb {
		t.Fatalf("both nodes claimed %s", pa)
	}
	if pa != "0/0" || pb != "0/1" {
		t.Fatalf("pairs = %s, %s; want the first free ones, 0/0 and 0/1", pa, pb)
	}
	// node-a dies: its lease, hence its claim, ends within the TTL; a new
	// node then gets 0/0 again (polled: the registry has no watch on it).
	regA.Close()
	regC := open()
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, _, err := claimSnowflake(ctx, regC, snowflakeCfg("node-c", true))
		if err != nil {
			t.Fatal(err)
		}
		got := snowflakeLabel(c.Worker, c.Process)
		if got == pa {
			break
		}
		// Not free yet: node-c got another pair; give it back and retry.
		if err := regC.Delete(ctx, snowflakeKey(c.Worker, c.Process)); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("pair %s of a dead node never came free (node-c got %s)", pa, got)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// A hand-set pair held by another live node is refused, and an auto
// node skips pairs that live nodes show in their labels even without a
// claim.
func TestSnowflakeManualConflictsAndLabelledPairs(t *testing.T) {
	open := snowflakeEtcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	regA, regB, regC := open(), open(), open()
	manual := snowflakeCfg("node-a", false)
	manual.Worker, manual.Process = 0, 0
	if _, _, err := claimSnowflake(ctx, regA, manual); err != nil {
		t.Fatal(err)
	}
	other := snowflakeCfg("node-b", false)
	_, _, err := claimSnowflake(ctx, regB, other)
	if err == nil || !strings.Contains(err.Error(), "node-a already mints ids as worker/process 0/0") {
		t.Fatalf("second hand-set 0/0 = %v, want a conflict naming node-a", err)
	}
	// A live node labelled 0/1 (no claim: registered by hand here).
	if _, err := regB.Register(ctx, registry.Node{Name: "labelled", Roles: []string{registry.RoleGuild}, Addr: "x:1",
		Labels: map[string]string{labelSnowflake: "0/1"}}); err != nil {
		t.Fatal(err)
	}
	c, _, err := claimSnowflake(ctx, regC, snowflakeCfg("node-c", true))
	if err != nil {
		t.Fatal(err)
	}
	if got := snowflakeLabel(c.Worker, c.Process); got != "0/2" {
		t.Fatalf("auto pair = %s, want 0/2 (0/0 claimed, 0/1 labelled)", got)
	}
}

// A registry without claims supports hand-set pairs only.
func TestSnowflakeAutoNeedsClaimer(t *testing.T) {
	open := snowflakeEtcd(t)
	reg := noClaims{open()}
	_, _, err := claimSnowflake(context.Background(), reg, snowflakeCfg("n", true))
	if err == nil || !strings.Contains(err.Error(), "--snowflake-id=auto needs") {
		t.Fatalf("auto without Claimer = %v", err)
	}
	if _, _, err := claimSnowflake(context.Background(), reg, snowflakeCfg("n", false)); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("manual without Claimer = %v", err)
	}
}

// noClaims hides the registry's Claimer.
type noClaims struct{ registry.Registry }
