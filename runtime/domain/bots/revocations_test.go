package bots_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/concord-chat/concord/runtime/domain/bots"
	"github.com/concord-chat/concord/runtime/domain/permissions"
)

// recordedRevocations records what the Handler publishes.
type recordedRevocations struct {
	mu  sync.Mutex
	got []bots.Revocation
}

func (r *recordedRevocations) Revoked(_ context.Context, v bots.Revocation) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, v)
	return nil
}

func (r *recordedRevocations) list() []bots.Revocation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// TestRevocationsPublished: narrowing a managed role, resetting the token
// and removing the integration each publish one revocation;
// installing and widening publish none.
func TestRevocationsPublished(t *testing.T) {
	rec := &recordedRevocations{}
	e := newEnv(t, func(_ *bots.Config, d *bots.Deps) { d.Revocations = rec })
	a := e.createApp("revoked")
	e.install(a, permissions.ViewChannel|permissions.SendMessages)
	e.install(a, permissions.ViewChannel|permissions.SendMessages|permissions.UseApplicationCommands)
	if got := rec.list(); len(got) != 0 {
		t.Fatalf("install and widening published %+v", got)
	}
	e.install(a, permissions.ViewChannel)
	want := []bots.Revocation{{Kind: bots.RevokedPermissions, ApplicationID: a.ID, BotUserID: a.BotID, GuildID: guildID}}
	if got := rec.list(); !slices.Equal(got, want) {
		t.Fatalf("narrowing published %+v, want %+v", got, want)
	}

	e.expect(e.do("POST", fmt.Sprintf("/api/v10/applications/%d/bot/reset", a.ID), e.owner, nil), 200, 0)
	bot, err := e.users.GetUser(context.Background(), a.BotID)
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, bots.Revocation{Kind: bots.RevokedToken, ApplicationID: a.ID, BotUserID: a.BotID, TokenGeneration: bot.TokenGeneration})
	if got := rec.list(); !slices.Equal(got, want) || bot.TokenGeneration == 0 {
		t.Fatalf("token reset published %+v, want %+v", got, want)
	}

	e.expect(e.do("DELETE", fmt.Sprintf("/api/v10/guilds/%d/integrations/%d", guildID, a.ID), e.admin, nil), 204, 0)
	want = append(want, bots.Revocation{Kind: bots.RevokedInstall, ApplicationID: a.ID, BotUserID: a.BotID, GuildID: guildID})
	if got := rec.list(); !slices.Equal(got, want) {
		t.Fatalf("uninstall published %+v, want %+v", got, want)
	}
}
