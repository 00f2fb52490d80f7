//go:build integration

package cassandra_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/concord-chat/concord/runtime/adapters/store/cassandra"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/bots"
	"github.com/concord-chat/concord/runtime/domain/bots/botstest"
	botscassandra "github.com/concord-chat/concord/runtime/domain/bots/cassandra"
)

// These tests need a real Cassandra (or ScyllaDB) named by
// CONCORD_CASSANDRA=host:port. `make test` starts one with
// hack/cassandra/start.sh; by hand:
//
//	export CONCORD_CASSANDRA="$(hack/cassandra/start.sh)"
//	go test -tags integration ./runtime/domain/bots/cassandra/

// server returns the address of the test server or fails the test.
func server(t testing.TB) string {
	t.Helper()
	addr := os.Getenv("CONCORD_CASSANDRA")
	if addr == "" {
		t.Fatal("CONCORD_CASSANDRA is not set: run `make test`, or " +
			"`export CONCORD_CASSANDRA=\"$(hack/cassandra/start.sh)\"` before go test -tags integration")
	}
	return addr
}

// freshKeyspace returns a new keyspace name and drops the keyspace when
// the test ends.
func freshKeyspace(t testing.TB, addr string) string {
	ks := fmt.Sprintf("concord_bots_test_%d_%08x", time.Now().Unix(), rand.Uint32())
	t.Cleanup(func() {
		cluster := gocql.NewCluster(addr)
		cluster.Timeout = time.Minute
		s, err := cluster.CreateSession()
		if err != nil {
			t.Errorf("drop keyspace %s: %v", ks, err)
			return
		}
		defer s.Close()
		if err := s.Query(`DROP KEYSPACE IF EXISTS ` + ks).Exec(); err != nil {
			t.Errorf("drop keyspace %s: %v", ks, err)
		}
	})
	return ks
}

// openDB opens a main store (its own session: one "pod") on keyspace ks,
// closed when the test ends.
func openDB(t testing.TB, addr, ks string) *cassandra.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	db, err := cassandra.New(ctx, cassandra.Config{
		Hosts: []string{addr}, Keyspace: ks, ReplicationFactor: 1, Timeout: 30 * time.Second,
	})
	if err != nil {
		t.Fatalf("cassandra.New: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func openStore(t testing.TB, db *cassandra.Store, cfg botscassandra.Config) *botscassandra.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := botscassandra.New(ctx, cfg, db)
	if err != nil {
		t.Fatalf("bots cassandra New: %v", err)
	}
	return s
}

// botTables are emptied between the conformance groups, which each
// expect an empty store and use fixed ids.
var botTables = []string{"bot_applications", "bot_applications_by_bot", "bot_applications_by_owner",
	"bot_commands", "bot_installations", "bot_interactions", "bot_interactions_by_minute", "bot_interaction_minutes"}

// TestConformance runs the bots.Store suite, unchanged, against the
// server: one fresh keyspace for the run, emptied (TRUNCATE) before each
// group, and a new Store per group.
func TestConformance(t *testing.T) {
	addr := server(t)
	db := openDB(t, addr, freshKeyspace(t, addr))
	botstest.Run(t, func(t *testing.T) bots.Store {
		s := openStore(t, db, botscassandra.Config{})
		for _, table := range botTables {
			if err := db.Session().Query(`TRUNCATE ` + table).Exec(); err != nil {
				t.Fatalf("truncate %s: %v", table, err)
			}
		}
		return s
	})
}

// TestTwoProcesses runs two Stores on two sessions (two pods) over one
// keyspace: each sees the other's writes, and concurrent UpdateInteraction
// calls from both lose no update and let exactly one first
// acknowledgement win.
func TestTwoProcesses(t *testing.T) {
	addr := server(t)
	ks := freshKeyspace(t, addr)
	dbs := []*cassandra.Store{openDB(t, addr, ks), openDB(t, addr, ks)}
	ctx := context.Background()
	// Both create the bot tables at once (the migration lock decides).
	stores := make([]*botscassandra.Store, 2)
	errs := make([]error, 2)
	var start sync.WaitGroup
	for i, db := range dbs {
		start.Add(1)
		go func() {
			defer start.Done()
			stores[i], errs[i] = botscassandra.New(ctx, botscassandra.Config{}, db)
		}()
	}
	start.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("concurrent New: %v", err)
	}
	a, b := stores[0], stores[1]
	defer a.Close()
	defer b.Close()

	app := bots.Application{ID: 10, Name: "pod", OwnerID: 1, BotUserID: 11, PublicKey: []byte{7}}
	if err := a.CreateApplication(ctx, app); err != nil {
		t.Fatal(err)
	}
	if got, err := b.ApplicationByBot(ctx, 11); err != nil || got.Name != "pod" {
		t.Fatalf("B: ApplicationByBot = %+v, %v", got, err)
	}
	if err := b.CreateApplication(ctx, bots.Application{ID: 12, OwnerID: 2, BotUserID: 11}); !errors.Is(err, bots.ErrExists) {
		t.Fatalf("B: CreateApplication with A's bot user: %v, want ErrExists", err)
	}
	if _, err := a.GetApplication(ctx, 12); !errors.Is(err, bots.ErrNotFound) {
		t.Fatalf("a refused create left application 12: %v", err)
	}
	app.Name = "renamed"
	if err := b.PutApplication(ctx, app); err != nil {
		t.Fatalf("B: PutApplication: %v", err)
	}
	if got, err := a.GetApplication(ctx, 10); err != nil || got.Name != "renamed" {
		t.Fatalf("A: GetApplication after B's put = %+v, %v", got, err)
	}
	if err := a.PutApplication(ctx, bots.Application{ID: 13, BotUserID: 14}); !errors.Is(err, bots.ErrNotFound) {
		t.Fatalf("PutApplication of a missing application: %v, want ErrNotFound", err)
	}
	moved := app
	moved.BotUserID = 15
	if err := a.PutApplication(ctx, moved); err == nil || errors.Is(err, bots.ErrNotFound) {
		t.Fatalf("PutApplication changing the bot user: %v, want a refusal", err)
	}
	cmd := bots.Command{ID: 20, ApplicationID: 10, Def: bots.CommandDef{Name: "ping", Description: "p"}}
	if err := b.ReplaceCommands(ctx, 10, 0, []bots.Command{cmd}); err != nil {
		t.Fatal(err)
	}
	if list, err := a.ListCommands(ctx, 10, 0); err != nil || len(list) != 1 || list[0].Def.Name != "ping" {
		t.Fatalf("A: ListCommands = %+v, %v", list, err)
	}
	if err := a.PutInstallation(ctx, bots.Installation{GuildID: 30, ApplicationID: 10, RoleID: 31}); err != nil {
		t.Fatal(err)
	}
	if got, err := b.GetInstallation(ctx, 30, 10); err != nil || got.RoleID != 31 {
		t.Fatalf("B: GetInstallation = %+v, %v", got, err)
	}

	iid := snowflake.FromTime(time.Now()) + 1
	if err := a.CreateInteraction(ctx, bots.Interaction{ID: iid, ApplicationID: 10}); err != nil {
		t.Fatal(err)
	}
	if err := b.CreateInteraction(ctx, bots.Interaction{ID: iid}); !errors.Is(err, bots.ErrExists) {
		t.Fatalf("B: CreateInteraction of A's id: %v, want ErrExists", err)
	}
	const perStore, workers = 50, 5
	var wg sync.WaitGroup
	var mu sync.Mutex
	winners := 0
	for si, s := range []*botscassandra.Store{a, b} {
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range perStore / workers {
					mark := snowflake.ID(1000*(si+1) + 100*w + i)
					got, err := s.UpdateInteraction(ctx, iid, func(in *bots.Interaction) error {
						in.FollowupIDs = append(in.FollowupIDs, mark)
						if in.State == bots.StatePending {
							in.State, in.ResponseMessageID = bots.StateAcknowledged, mark
						}
						return nil
					})
					if err != nil {
						t.Errorf("store %d: UpdateInteraction: %v", si, err)
						return
					}
					if got.ResponseMessageID == mark {
						mu.Lock()
						winners++
						mu.Unlock()
					}
				}
			}()
		}
	}
	wg.Wait()
	for _, s := range []*botscassandra.Store{a, b} {
		got, err := s.GetInteraction(ctx, iid)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.FollowupIDs) != 2*perStore {
			t.Fatalf("%d of %d appends survived: lost updates", len(got.FollowupIDs), 2*perStore)
		}
		seen := map[snowflake.ID]bool{}
		for _, f := range got.FollowupIDs {
			if seen[f] {
				t.Fatalf("update %d applied twice", f)
			}
			seen[f] = true
		}
		if got.State != bots.StateAcknowledged || !seen[got.ResponseMessageID] {
			t.Fatalf("state %d, response %d", got.State, got.ResponseMessageID)
		}
	}
	if winners != 1 {
		t.Fatalf("%d updates acknowledged the interaction, want 1", winners)
	}
	if n, err := b.DeleteInteractionsBefore(ctx, iid+1); err != nil || n != 1 {
		t.Fatalf("B: DeleteInteractionsBefore = %d, %v; want 1", n, err)
	}
	if _, err := a.GetInteraction(ctx, iid); !errors.Is(err, bots.ErrNotFound) {
		t.Fatalf("A: interaction B deleted: %v", err)
	}
}

// TestInteractionTTL checks that interactions expire InteractionTTL after
// creation by themselves, and that updates do not extend their life.
func TestInteractionTTL(t *testing.T) {
	addr := server(t)
	s := openStore(t, openDB(t, addr, freshKeyspace(t, addr)), botscassandra.Config{InteractionTTL: 4 * time.Second})
	defer s.Close()
	ctx := context.Background()
	iid := snowflake.FromTime(time.Now()) + 1
	start := time.Now()
	if err := s.CreateInteraction(ctx, bots.Interaction{ID: iid}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(start.Add(2 * time.Second)))
	if _, err := s.UpdateInteraction(ctx, iid, func(in *bots.Interaction) error {
		in.State = bots.StateAcknowledged
		return nil
	}); err != nil {
		t.Fatalf("UpdateInteraction within the TTL: %v", err)
	}
	if got, err := s.GetInteraction(ctx, iid); err != nil || got.State != bots.StateAcknowledged {
		t.Fatalf("GetInteraction after the update = %+v, %v", got, err)
	}
	// Expiry has a granularity of one second: the row expires between 3s
	// and 4s, and had the update restarted the TTL, between 5s and 6s.
	time.Sleep(time.Until(start.Add(4500 * time.Millisecond)))
	if _, err := s.GetInteraction(ctx, iid); !errors.Is(err, bots.ErrNotFound) {
		t.Fatalf("interaction alive 4.5s after creation with a 4s TTL (updated at 2s): %v", err)
	}
}

// TestLargeReplace replaces a scope with 100 large commands (Discord's
// limit), above Cassandra's batch size thresholds for multi-partition
// batches, and back to a small set.
func TestLargeReplace(t *testing.T) {
	addr := server(t)
	s := openStore(t, openDB(t, addr, freshKeyspace(t, addr)), botscassandra.Config{})
	defer s.Close()
	ctx := context.Background()
	var cmds []bots.Command
	for i := range 100 {
		def := bots.CommandDef{Name: fmt.Sprintf("c%d", i), Description: strings.Repeat("d", 100)}
		for j := range 25 {
			def.Options = append(def.Options, bots.CommandOption{
				Type: bots.OptionString, Name: fmt.Sprintf("o%d", j), Description: strings.Repeat("o", 100)})
		}
		cmds = append(cmds, bots.Command{ID: snowflake.ID(i + 1), ApplicationID: 1, GuildID: 2, Def: def})
	}
	if err := s.ReplaceCommands(ctx, 1, 2, cmds); err != nil {
		t.Fatalf("ReplaceCommands of 100: %v", err)
	}
	if list, err := s.ListCommands(ctx, 1, 2); err != nil || len(list) != 100 || len(list[99].Def.Options) != 25 {
		t.Fatalf("ListCommands = %d commands, %v", len(list), err)
	}
	if err := s.ReplaceCommands(ctx, 1, 2, cmds[50:51]); err != nil {
		t.Fatal(err)
	}
	if list, err := s.ListCommands(ctx, 1, 2); err != nil || !slices.EqualFunc(list, cmds[50:51],
		func(a, b bots.Command) bool { return a.ID == b.ID }) {
		t.Fatalf("after replacing with one: %d commands, %v", len(list), err)
	}
}

// TestClosed: a closed Store fails with bots.ErrUnavailable and leaves
// the shared session to its owner.
func TestClosed(t *testing.T) {
	addr := server(t)
	db := openDB(t, addr, freshKeyspace(t, addr))
	s := openStore(t, db, botscassandra.Config{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetApplication(context.Background(), 1); !errors.Is(err, bots.ErrUnavailable) {
		t.Fatalf("GetApplication on a closed store: %v, want ErrUnavailable", err)
	}
	if err := db.Ping(context.Background()); err != nil {
		t.Fatalf("the main store's session was closed with the bot store: %v", err)
	}
}

// BenchmarkUpdateInteraction measures the acknowledgement path (one
// read and one compare-and-set per iteration) on the server.
func BenchmarkUpdateInteraction(b *testing.B) {
	addr := server(b)
	s := openStore(b, openDB(b, addr, freshKeyspace(b, addr)), botscassandra.Config{})
	defer s.Close()
	botstest.Bench(b, s)
}
