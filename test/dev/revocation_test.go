package dev

import (
	"context"
	"testing"
	"time"

	"github.com/concord-chat/concord/internal/resttest"
	"github.com/concord-chat/concord/runtime/config"
	"github.com/concord-chat/concord/runtime/domain/bots"
	"github.com/concord-chat/concord/runtime/edge/gateway"
)

// Revocation with a deadline through the process's wiring (a revoked bot stops
// receiving events within the lease deadline): a real gateway WebSocket client of an installed bot, the
// embedded-etcd push and the entitlement leases of `concord dev`.

// TestRevocationUninstallStopsGuildEvents: removing the integration
// through REST ends the bot's events of that guild at once: GUILD_DELETE,
// and no MESSAGE_CREATE of the guild after it, while the guild keeps
// posting.
func TestRevocationUninstallStopsGuildEvents(t *testing.T) {
	w := newRevWorld(t)
	b := w.dialBot(w.botToken)
	b.waitReady()
	b.waitGuild(w.guild)
	ps := w.startPoster(w.guild, w.channel, 10*time.Millisecond)
	waitFor(t, 10*time.Second, "first event", func() bool { _, _, n, _ := b.stats(w.guild); return n > 0 })
	r := w.measureRevocation(b, w.guild, 5*time.Second, 500*time.Millisecond, func() {
		ok2xx(t, restStatus(t, w.addr, w.owner, "DELETE", "/guilds/"+w.guild.String()+"/integrations/"+w.appID.String()), "remove integration")
	})
	ps.stop()
	t.Logf("uninstall: last event +%v, GUILD_DELETE +%v, events after it %d", r.lastEvent, r.guildDelete, r.afterDelete)
	if r.afterDelete != 0 {
		t.Fatalf("%d events of the guild after GUILD_DELETE", r.afterDelete)
	}
	if r.lastEvent > time.Second {
		t.Fatalf("last event %v after the uninstall, want well under a second", r.lastEvent)
	}
	if got := counterValue(t, w.p, "concord_entitlement_pushes_total", "result", "published"); got < 1 {
		t.Fatalf("uninstall published %v revocations, want ≥ 1", got)
	}
}

// TestRevocationTokenResetCloses4004: a token reset closes the bot's
// session with 4004 (not resumable); the old token no longer identifies.
func TestRevocationTokenResetCloses4004(t *testing.T) {
	w := newRevWorld(t)
	b := w.dialBot(w.botToken)
	b.waitReady()
	var reset struct {
		Token string `json:"token"`
	}
	resttest.Call(t, w.addr, w.owner, "POST", "/applications/"+w.appID.String()+"/bot/reset", nil, &reset)
	if code, _ := b.waitClosed(5 * time.Second); code != gateway.CloseAuthenticationFailed {
		t.Fatalf("close code %d, want 4004", code)
	}
	old := w.dialBot(w.botToken)
	if code, _ := old.waitClosed(5 * time.Second); code != gateway.CloseAuthenticationFailed {
		t.Fatalf("old token identify: close %d, want 4004", code)
	}
	fresh := w.dialBot(reset.Token)
	fresh.waitReady()
}

// TestRevocationTokenResetByLeaseAlone: the token generation bumped in
// the store with no push and no in-process close (as another API node
// would leave it when its push is lost) closes the session with 4004 at
// the next lease renewal.
func TestRevocationTokenResetByLeaseAlone(t *testing.T) {
	const ttl = 2 * time.Second
	w := newRevWorld(t, func(c *config.Config) { c.Entitlements.TTL = ttl })
	b := w.dialBot(w.botToken)
	b.waitReady()
	t0 := time.Now()
	if err := w.p.Auth().Revoke(context.Background(), w.botID); err != nil {
		t.Fatal(err)
	}
	code, at := b.waitClosed(ttl + 2*time.Second)
	if code != gateway.CloseAuthenticationFailed {
		t.Fatalf("close code %d, want 4004", code)
	}
	t.Logf("token reset without push: closed +%v (TTL %v)", at.Sub(t0), ttl)
	if at.Sub(t0) > ttl+time.Second {
		t.Fatalf("closed %v after the reset, want within the TTL (%v) plus a second", at.Sub(t0), ttl)
	}
}

// TestRevocationLostPushBoundedByLease: the installation record goes
// while the guild tier is never told (the bot stays a member) — with the
// push the bot stops at once; with the push dropped, the lease renewal
// finds the missing record and stops it within the TTL.
func TestRevocationLostPushBoundedByLease(t *testing.T) {
	const ttl = 2 * time.Second
	w := newRevWorld(t, func(c *config.Config) { c.Entitlements.TTL = ttl })
	b := w.dialBot(w.botToken)
	b.waitReady()
	ctx := context.Background()
	revoke := func(guild, channel interface{ String() string }) func() {
		return func() {
			gid := parseID(t, guild.String())
			if err := w.p.Bots().Store().DeleteInstallation(ctx, gid, w.appID); err != nil {
				t.Fatal(err)
			}
			_ = leasesOf(w.p).Revoked(ctx, bots.Revocation{Kind: bots.RevokedInstall, ApplicationID: w.appID, BotUserID: w.botID, GuildID: gid})
		}
	}
	for _, tc := range []struct {
		name  string
		drop  bool
		limit time.Duration
	}{{"push", false, time.Second}, {"push lost", true, ttl + time.Second}} {
		guild, channel := w.newInstalledGuild(tc.name)
		b.waitGuild(guild)
		ps := w.startPoster(guild, channel, 10*time.Millisecond)
		waitFor(t, 10*time.Second, "first event", func() bool { _, _, n, _ := b.stats(guild); return n > 0 })
		leasesOf(w.p).bus.SetDropPublish(tc.drop)
		r := w.measureRevocation(b, guild, ttl+3*time.Second, 500*time.Millisecond, revoke(guild, channel))
		ps.stop()
		t.Logf("%s: last event +%v, GUILD_DELETE +%v, events after it %d (TTL %v)", tc.name, r.lastEvent, r.guildDelete, r.afterDelete, ttl)
		if r.afterDelete != 0 {
			t.Fatalf("%s: %d events after GUILD_DELETE", tc.name, r.afterDelete)
		}
		if r.lastEvent > tc.limit || r.guildDelete > tc.limit {
			t.Fatalf("%s: last event +%v, GUILD_DELETE +%v; want within %v", tc.name, r.lastEvent, r.guildDelete, tc.limit)
		}
	}
	if got := counterValue(t, w.p, "concord_entitlement_revocations_applied_total", "via", "renewal"); got < 1 {
		t.Fatalf("renewal revocations %v, want ≥ 1 (the lost push)", got)
	}
}

// TestRevocationOutagePolicy: with the bot store and the registry
// unavailable, the open session keeps receiving events past its lease's
// expiry, a new identify is refused with op 9 (d:false), and the session
// closes with 4000 once the grace period ends; after the outage a new
// identify is admitted.
func TestRevocationOutagePolicy(t *testing.T) {
	const ttl, grace = 2 * time.Second, 3 * time.Second
	w := newRevWorld(t, func(c *config.Config) {
		c.Entitlements = config.Entitlements{TTL: ttl, Grace: grace, RetryEvery: 200 * time.Millisecond}
	})
	b := w.dialBot(w.botToken)
	b.waitReady()
	b.waitGuild(w.guild)
	ps := w.startPoster(w.guild, w.channel, 20*time.Millisecond)
	defer ps.stop()
	ent := leasesOf(w.p)
	t0 := time.Now()
	ent.source.Set(0, 0, true)
	ent.bus.SetDown(true)
	waitFor(t, 5*time.Second, "push watch lost", func() bool { return !ent.mgr.PushConnected() })

	refused := w.dialBot(w.botToken)
	select {
	case resumable := <-refused.invalid:
		if resumable {
			t.Fatal("op 9 d:true, want d:false")
		}
	case <-refused.ready:
		t.Fatal("a new bot identify was admitted during the outage")
	case <-refused.closed:
		t.Fatalf("new identify closed with %d, want op 9", refused.code)
	case <-time.After(5 * time.Second):
		t.Fatal("no answer to IDENTIFY within 5 s")
	}

	// The lease expires at most TTL after the outage began; events keep
	// coming after that.
	waitFor(t, ttl+grace, "an event after the lease expired", func() bool {
		last, _, _, _ := b.stats(w.guild)
		return last.Sub(t0) > ttl+200*time.Millisecond
	})
	code, at := b.waitClosed(ttl + grace + 3*time.Second)
	if code != gateway.CloseUnknownError {
		t.Fatalf("close code %d at grace expiry, want 4000", code)
	}
	last, _, _, _ := b.stats(w.guild)
	t.Logf("outage: session closed +%v (TTL %v + grace %v), last event +%v", at.Sub(t0), ttl, grace, last.Sub(t0))
	if at.Sub(t0) < grace {
		t.Fatalf("closed %v into the outage, before the grace (%v)", at.Sub(t0), grace)
	}

	ent.source.Set(0, 0, false)
	ent.bus.SetDown(false)
	waitFor(t, 10*time.Second, "push watch back", ent.mgr.PushConnected)
	again := w.dialBot(w.botToken)
	again.waitReady()
}

// TestRevocationNarrowingLeavesGuildToPermissions: narrowing the bot's
// managed role publishes a revocation, but the lease takes nothing away:
// the guild actors evaluate the narrowed permissions on every event, and
// the session keeps the guild (no GUILD_DELETE, events still arrive
// through @everyone's VIEW_CHANNEL).
func TestRevocationNarrowingLeavesGuildToPermissions(t *testing.T) {
	w := newRevWorld(t)
	b := w.dialBot(w.botToken)
	b.waitReady()
	b.waitGuild(w.guild)
	resttest.Call(t, w.addr, w.owner, "POST", "/oauth2/authorize?client_id="+w.appID.String()+"&scope=bot&permissions=1024",
		map[string]any{"guild_id": w.guild.String(), "permissions": "1024", "authorize": true}, nil)
	waitFor(t, 5*time.Second, "narrowing pushed and applied", func() bool {
		return counterValue(t, w.p, "concord_entitlement_pushes_total", "result", "received") >= 1
	})
	ps := w.startPoster(w.guild, w.channel, 10*time.Millisecond)
	defer ps.stop()
	waitFor(t, 5*time.Second, "events after the narrowing", func() bool { _, _, n, _ := b.stats(w.guild); return n >= 10 })
	if _, del, _, _ := b.stats(w.guild); !del.IsZero() {
		t.Fatal("narrowing sent GUILD_DELETE")
	}
	if got := counterValue(t, w.p, "concord_entitlement_revocations_applied_total", "what", "guild"); got != 0 {
		t.Fatalf("narrowing revoked %v guilds", got)
	}
}

// TestRevocationRegistryDown stops the process's embedded etcd for real:
// the revocation watch reports the loss within seconds and new bot
// identifies get op 9, while the open session keeps running on leases
// renewed from the bot store; a revocation made meanwhile (its push
// fails, bounded by the publish timeout) still stops the bot's events
// within the TTL; once etcd is back, identifies are admitted again.
func TestRevocationRegistryDown(t *testing.T) {
	const ttl = 2 * time.Second
	w := newRevWorld(t, func(c *config.Config) { c.Entitlements.TTL = ttl })
	ent := leasesOf(w.p)
	b := w.dialBot(w.botToken)
	b.waitReady()
	b.waitGuild(w.guild)
	ps := w.startPoster(w.guild, w.channel, 10*time.Millisecond)
	defer ps.stop()

	t0 := time.Now()
	ent.etcd.halt()
	waitFor(t, 10*time.Second, "revocation watch lost", func() bool { return !ent.mgr.PushConnected() })
	t.Logf("registry stopped: watch lost after %v", time.Since(t0).Round(time.Millisecond))
	refused := w.dialBot(w.botToken)
	select {
	case resumable := <-refused.invalid:
		if resumable {
			t.Fatal("op 9 d:true, want d:false")
		}
	case <-refused.ready:
		t.Fatal("a new bot identify was admitted without the registry")
	case <-time.After(5 * time.Second):
		t.Fatal("no op 9 within 5 s")
	}
	// Past several lease periods the open session still gets events.
	waitFor(t, 3*ttl, "events past the TTL without the registry", func() bool {
		last, _, _, _ := b.stats(w.guild)
		return last.Sub(t0) > ttl+time.Second
	})

	ctx := context.Background()
	r := w.measureRevocation(b, w.guild, ttl+3*time.Second, 300*time.Millisecond, func() {
		if err := w.p.Bots().Store().DeleteInstallation(ctx, w.guild, w.appID); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := ent.Revoked(ctx, bots.Revocation{Kind: bots.RevokedInstall, ApplicationID: w.appID, BotUserID: w.botID, GuildID: w.guild}); err == nil {
			t.Error("publish succeeded with the registry stopped")
		}
		if d := time.Since(start); d > ent.mgr.Config().ReadTimeout+time.Second {
			t.Errorf("publish took %v with the registry stopped", d)
		}
	})
	t.Logf("revocation without the registry: last event +%v, GUILD_DELETE +%v (TTL %v)", r.lastEvent, r.guildDelete, ttl)
	if r.afterDelete != 0 || r.guildDelete > ttl+ent.mgr.Config().ReadTimeout+time.Second {
		t.Fatalf("GUILD_DELETE +%v with %d events after it; want within the TTL plus the failed publish", r.guildDelete, r.afterDelete)
	}

	if err := ent.etcd.start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "revocation watch back", ent.mgr.PushConnected)
	again := w.dialBot(w.botToken)
	again.waitReady()
}
