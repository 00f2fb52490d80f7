// Package botstest is the conformance suite of bots.Store: every adapter
// runs Run (and may run Bench) against itself.
package botstest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/bots"
)

// Run runs the suite; newStore returns an empty store, which Run closes.
func Run(t *testing.T, newStore func(t *testing.T) bots.Store) {
	groups := []struct {
		name string
		fn   func(*testing.T, bots.Store)
	}{
		{"Applications", testApplications},
		{"Commands", testCommands},
		{"Installations", testInstallations},
		{"Interactions", testInteractions},
		{"InteractionUpdatesAreAtomic", testInteractionAtomic},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			s := newStore(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			g.fn(t, s)
		})
	}
}

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func testApplications(t *testing.T, s bots.Store) {
	ctx := context.Background()
	a := bots.Application{
		ID: 100, Name: "app", OwnerID: 1, BotUserID: 101, PublicKey: []byte{1, 2, 3},
		SealedPrivateKey: []byte{4, 5}, Flags: bots.FlagGatewayMessageContent, CreatedAt: t0,
	}
	if _, err := s.GetApplication(ctx, 100); !errors.Is(err, bots.ErrNotFound) {
		t.Fatalf("GetApplication of missing: %v, want ErrNotFound", err)
	}
	if err := s.CreateApplication(ctx, a); err != nil {
		t.Fatalf("CreateApplication: %v", err)
	}
	if err := s.CreateApplication(ctx, a); !errors.Is(err, bots.ErrExists) {
		t.Fatalf("CreateApplication twice: %v, want ErrExists", err)
	}
	other := a
	other.ID = 200
	if err := s.CreateApplication(ctx, other); !errors.Is(err, bots.ErrExists) {
		t.Fatalf("CreateApplication with a bound bot user: %v, want ErrExists", err)
	}
	got, err := s.GetApplication(ctx, 100)
	if err != nil || got.Name != "app" || got.BotUserID != 101 || !slices.Equal(got.PublicKey, a.PublicKey) ||
		!slices.Equal(got.SealedPrivateKey, a.SealedPrivateKey) || !got.CreatedAt.Equal(t0) || got.Flags != a.Flags {
		t.Fatalf("GetApplication = %+v, %v", got, err)
	}
	if got, err := s.ApplicationByBot(ctx, 101); err != nil || got.ID != 100 {
		t.Fatalf("ApplicationByBot = %+v, %v", got, err)
	}
	if _, err := s.ApplicationByBot(ctx, 999); !errors.Is(err, bots.ErrNotFound) {
		t.Fatalf("ApplicationByBot of a user: %v, want ErrNotFound", err)
	}
	a.InteractionsEndpointURL = "https://bot.example/i"
	if err := s.PutApplication(ctx, a); err != nil {
		t.Fatalf("PutApplication: %v", err)
	}
	if got, _ := s.GetApplication(ctx, 100); got.InteractionsEndpointURL != a.InteractionsEndpointURL {
		t.Fatalf("PutApplication not stored: %+v", got)
	}
	b := bots.Application{ID: 50, Name: "b", OwnerID: 1, BotUserID: 51}
	if err := s.CreateApplication(ctx, b); err != nil {
		t.Fatal(err)
	}
	list, err := s.ApplicationsByOwner(ctx, 1)
	if err != nil || len(list) != 2 || list[0].ID != 50 || list[1].ID != 100 {
		t.Fatalf("ApplicationsByOwner = %+v, %v; want ids 50, 100", list, err)
	}
	if list, _ := s.ApplicationsByOwner(ctx, 2); len(list) != 0 {
		t.Fatalf("ApplicationsByOwner(2) = %+v", list)
	}
}

func cmd(id, guild snowflake.ID, name string) bots.Command {
	return bots.Command{ID: id, ApplicationID: 100, GuildID: guild, Version: id, Def: bots.CommandDef{
		Type: bots.CommandChatInput, Name: name, Description: "d " + name,
		Options: []bots.CommandOption{{Type: bots.OptionString, Name: "text", Description: "t", Required: true}},
	}}
}

func ids(cs []bots.Command) []snowflake.ID {
	out := []snowflake.ID{}
	for _, c := range cs {
		out = append(out, c.ID)
	}
	return out
}

func testCommands(t *testing.T, s bots.Store) {
	ctx := context.Background()
	for _, c := range []bots.Command{cmd(3, 0, "c"), cmd(1, 0, "a"), cmd(2, 7, "g")} {
		if err := s.PutCommand(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	global, err := s.ListCommands(ctx, 100, 0)
	if err != nil || !slices.Equal(ids(global), []snowflake.ID{1, 3}) {
		t.Fatalf("ListCommands global = %v, %v", ids(global), err)
	}
	got, err := s.GetCommand(ctx, 100, 0, 1)
	if err != nil || got.Def.Name != "a" || len(got.Def.Options) != 1 || !got.Def.Options[0].Required {
		t.Fatalf("GetCommand = %+v, %v", got, err)
	}
	if _, err := s.GetCommand(ctx, 100, 0, 2); !errors.Is(err, bots.ErrNotFound) {
		t.Fatalf("guild command found in global scope: %v", err)
	}
	if err := s.ReplaceCommands(ctx, 100, 0, []bots.Command{cmd(9, 0, "z")}); err != nil {
		t.Fatal(err)
	}
	if global, _ := s.ListCommands(ctx, 100, 0); !slices.Equal(ids(global), []snowflake.ID{9}) {
		t.Fatalf("after ReplaceCommands: %v", ids(global))
	}
	if guild, _ := s.ListCommands(ctx, 100, 7); !slices.Equal(ids(guild), []snowflake.ID{2}) {
		t.Fatalf("ReplaceCommands touched another scope: %v", ids(guild))
	}
	if err := s.DeleteCommand(ctx, 100, 7, 2); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteCommand(ctx, 100, 7, 2); !errors.Is(err, bots.ErrNotFound) {
		t.Fatalf("DeleteCommand twice: %v", err)
	}
	if err := s.ReplaceCommands(ctx, 100, 0, nil); err != nil {
		t.Fatal(err)
	}
	if global, _ := s.ListCommands(ctx, 100, 0); len(global) != 0 {
		t.Fatalf("ReplaceCommands(nil) left %v", ids(global))
	}
}

func testInstallations(t *testing.T, s bots.Store) {
	ctx := context.Background()
	in := bots.Installation{GuildID: 7, ApplicationID: 100, BotUserID: 101, RoleID: 8, Permissions: 3072, InstalledBy: 1, InstalledAt: t0}
	if err := s.PutInstallation(ctx, in); err != nil {
		t.Fatal(err)
	}
	if err := s.PutInstallation(ctx, bots.Installation{GuildID: 7, ApplicationID: 50}); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetInstallation(ctx, 7, 100)
	if err != nil || got.RoleID != 8 || got.Permissions != 3072 || !got.InstalledAt.Equal(t0) {
		t.Fatalf("GetInstallation = %+v, %v", got, err)
	}
	list, err := s.GuildInstallations(ctx, 7)
	if err != nil || len(list) != 2 || list[0].ApplicationID != 50 {
		t.Fatalf("GuildInstallations = %+v, %v", list, err)
	}
	if err := s.DeleteInstallation(ctx, 7, 100); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetInstallation(ctx, 7, 100); !errors.Is(err, bots.ErrNotFound) {
		t.Fatalf("GetInstallation after delete: %v", err)
	}
	if err := s.DeleteInstallation(ctx, 7, 100); !errors.Is(err, bots.ErrNotFound) {
		t.Fatalf("DeleteInstallation twice: %v", err)
	}
}

func testInteractions(t *testing.T, s bots.Store) {
	ctx := context.Background()
	idAt := func(d time.Duration) snowflake.ID { return snowflake.FromTime(t0.Add(d)) + 1 }
	first := bots.Interaction{ID: idAt(0), ApplicationID: 100, Type: 2, TokenMAC: []byte{9, 9}, Data: []byte(`{"name":"x"}`), CreatedAt: t0}
	if err := s.CreateInteraction(ctx, first); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateInteraction(ctx, first); !errors.Is(err, bots.ErrExists) {
		t.Fatalf("CreateInteraction twice: %v", err)
	}
	got, err := s.GetInteraction(ctx, first.ID)
	if err != nil || !slices.Equal(got.TokenMAC, first.TokenMAC) || string(got.Data) != `{"name":"x"}` || got.State != bots.StatePending {
		t.Fatalf("GetInteraction = %+v, %v", got, err)
	}
	boom := errors.New("boom")
	if _, err := s.UpdateInteraction(ctx, first.ID, func(in *bots.Interaction) error {
		in.State = bots.StateAcknowledged
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("UpdateInteraction error = %v, want boom", err)
	}
	if got, _ := s.GetInteraction(ctx, first.ID); got.State != bots.StatePending {
		t.Fatal("a failed UpdateInteraction wrote")
	}
	upd, err := s.UpdateInteraction(ctx, first.ID, func(in *bots.Interaction) error {
		in.State, in.ResponseMessageID = bots.StateAcknowledged, 77
		in.FollowupIDs = append(in.FollowupIDs, 78)
		return nil
	})
	if err != nil || upd.State != bots.StateAcknowledged {
		t.Fatalf("UpdateInteraction = %+v, %v", upd, err)
	}
	if got, _ := s.GetInteraction(ctx, first.ID); got.ResponseMessageID != 77 || !slices.Equal(got.FollowupIDs, []snowflake.ID{78}) {
		t.Fatalf("update not stored: %+v", got)
	}
	if _, err := s.UpdateInteraction(ctx, 12345, func(*bots.Interaction) error { return nil }); !errors.Is(err, bots.ErrNotFound) {
		t.Fatalf("UpdateInteraction of missing: %v", err)
	}
	later := bots.Interaction{ID: idAt(20 * time.Minute), ApplicationID: 100}
	if err := s.CreateInteraction(ctx, later); err != nil {
		t.Fatal(err)
	}
	n, err := s.DeleteInteractionsBefore(ctx, idAt(10*time.Minute))
	if err != nil || n != 1 {
		t.Fatalf("DeleteInteractionsBefore = %d, %v; want 1", n, err)
	}
	if _, err := s.GetInteraction(ctx, first.ID); !errors.Is(err, bots.ErrNotFound) {
		t.Fatalf("old interaction survived: %v", err)
	}
	if _, err := s.GetInteraction(ctx, later.ID); err != nil {
		t.Fatalf("new interaction dropped: %v", err)
	}
}

// testInteractionAtomic races updates that each append one id: with
// atomic read-modify-write every append survives, and exactly one of the
// racing "first acknowledgement" updates wins.
func testInteractionAtomic(t *testing.T, s bots.Store) {
	ctx := context.Background()
	if err := s.CreateInteraction(ctx, bots.Interaction{ID: 5}); err != nil {
		t.Fatal(err)
	}
	const n = 16
	var wg sync.WaitGroup
	wins := make(chan snowflake.ID, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.UpdateInteraction(ctx, 5, func(in *bots.Interaction) error {
				in.FollowupIDs = append(in.FollowupIDs, snowflake.ID(i))
				if in.State != bots.StatePending {
					return nil
				}
				in.State = bots.StateAcknowledged
				in.ResponseMessageID = snowflake.ID(1000 + i)
				wins <- snowflake.ID(i)
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	close(wins)
	got, err := s.GetInteraction(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.FollowupIDs) != n {
		t.Fatalf("%d of %d appends survived: lost updates", len(got.FollowupIDs), n)
	}
	if len(wins) != 1 {
		t.Fatalf("%d updates saw the interaction pending, want 1", len(wins))
	}
}

// Bench measures the acknowledgement path: UpdateInteraction of one
// interaction per iteration.
func Bench(b *testing.B, s bots.Store) {
	ctx := context.Background()
	if err := s.CreateInteraction(ctx, bots.Interaction{ID: 1}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.UpdateInteraction(ctx, 1, func(in *bots.Interaction) error {
			in.CallbackType = i
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
}
