package dev

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/concord-chat/concord/runtime/services/apirole"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/bots"
	"github.com/concord-chat/concord/runtime/domain/entitlement"
	"github.com/concord-chat/concord/runtime/domain/event"
)

// Revocation in a registry brownout: an administrator revokes a bot during
// a registry brownout; the bot stops receiving events inside 10 seconds,
// or the scenario records exactly how long it took.
var (
	c9Trials   = flag.Int("claim9c.trials", 5, "TestClaim9cRevocationBrownout: revocations per scenario")
	c9Latency  = flag.Duration("claim9c.latency", 300*time.Millisecond, "TestClaim9cRevocationBrownout: latency added to every bot-store read in the brownout")
	c9Fail     = flag.Float64("claim9c.fail", 0.3, "TestClaim9cRevocationBrownout: share of bot-store reads failing in the brownout")
	c9Sessions = flag.Int("claim9c.sessions", 1000, "TestClaim9cRevocationBrownout: bot sessions for the renewal-load measurement")
	c9Window   = flag.Duration("claim9c.window", 20*time.Second, "TestClaim9cRevocationBrownout: renewal-load measurement window")
)

// TestClaim9cRevocationBrownout measures, with the default 10 s lease,
// the time from a revocation to the bot's last MESSAGE_CREATE of the
// guild (and to GUILD_DELETE) while the guild posts every 10 ms:
//
//   - push: the revocation is pushed through the embedded registry;
//   - brownout: the push is lost, and the bot store answers every lease
//     renewal after the injected latency and fails the injected share.
//
// The revocation is the installation record deleted while the guild tier
// is never told (the bot stays a member): only the push and the lease can
// stop the events, which is the path the claim is about (an uninstall
// through REST also removes the member in the guild actor, which stops
// events within milliseconds whatever happens to the push). Each trial
// waits a renewal period plus a random share of one after the first
// event, so revocations land at every phase of the lease. The test then
// records the steady renewal load of -claim9c.sessions bot sessions
// against the real stores. Run it as
//
//	go test -count=1 -run TestClaim9cRevocationBrownout -v ./test/dev
func TestClaim9cRevocationBrownout(t *testing.T) {
	if testing.Short() {
		t.Skip("claim 9c measurement: not in -short")
	}
	w := newRevWorld(t)
	ent := leasesOf(w.p)
	cfg := ent.mgr.Config()
	b := w.dialBot(w.botToken)
	b.waitReady()
	rnd := rand.New(rand.NewPCG(9, 3))
	ctx := context.Background()

	run := func(name string, brownout bool) []revocationResult {
		var out []revocationResult
		for i := range *c9Trials {
			guild, channel := w.newInstalledGuild(fmt.Sprintf("%s-%d", name, i))
			b.waitGuild(guild)
			ps := w.startPoster(guild, channel, 10*time.Millisecond)
			waitFor(t, 10*time.Second, "first event", func() bool { _, _, n, _ := b.stats(guild); return n > 0 })
			// Let the lease read the installation, then revoke at a
			// random phase of the renewal period.
			<-time.After(cfg.RenewEvery + time.Duration(rnd.Int64N(int64(cfg.RenewEvery))))
			if brownout {
				ent.bus.SetDropPublish(true)
				ent.source.Set(*c9Latency, *c9Fail, false)
			}
			r := w.measureRevocation(b, guild, cfg.Grace, time.Second, func() {
				if err := w.p.Bots().Store().DeleteInstallation(ctx, guild, w.appID); err != nil {
					t.Fatal(err)
				}
				_ = ent.Revoked(ctx, bots.Revocation{Kind: bots.RevokedInstall, ApplicationID: w.appID, BotUserID: w.botID, GuildID: guild})
			})
			ps.stop()
			ent.bus.SetDropPublish(false)
			ent.source.Set(0, 0, false)
			if r.afterDelete != 0 {
				t.Fatalf("%s trial %d: %d events after GUILD_DELETE", name, i, r.afterDelete)
			}
			t.Logf("%s trial %d: last event +%v, GUILD_DELETE +%v", name, i, r.lastEvent.Round(time.Millisecond), r.guildDelete.Round(time.Millisecond))
			out = append(out, r)
		}
		return out
	}
	push := run("push", false)
	brown := run("brownout", true)

	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "claim 9c: revocation, lease TTL %v (renewed every %v), brownout = push lost + bot-store reads +%v and %.0f%% failing\n",
		cfg.TTL, cfg.RenewEvery, *c9Latency, *c9Fail*100)
	fmt.Fprintln(tw, "scenario\ttrials\tlast event min\tmedian\tmax\tGUILD_DELETE max\twithin 10 s")
	for _, s := range []struct {
		name string
		rs   []revocationResult
	}{{"push", push}, {"brownout", brown}} {
		last := make([]time.Duration, len(s.rs))
		var delMax time.Duration
		within := 0
		for i, r := range s.rs {
			last[i] = max(r.lastEvent, r.guildDelete)
			delMax = max(delMax, r.guildDelete)
			if last[i] <= 10*time.Second {
				within++
			}
		}
		slices.Sort(last)
		fmt.Fprintf(tw, "%s\t%d\t%v\t%v\t%v\t%v\t%d/%d\n", s.name, len(last), last[0].Round(time.Millisecond),
			last[len(last)/2].Round(time.Millisecond), last[len(last)-1].Round(time.Millisecond), delMax.Round(time.Millisecond), within, len(last))
	}
	tw.Flush()
	for _, r := range push {
		if r.guildDelete > time.Second {
			t.Fatalf("with the push working a revocation took %v", r.guildDelete)
		}
	}

	measureRenewalLoad(t, w, *c9Sessions, *c9Window)
}

// countingUsers counts the user-store reads of lease renewals.
type countingUsers struct {
	store.Store
	n *atomic.Int64
}

func (c countingUsers) GetUser(ctx context.Context, id snowflake.ID) (store.User, error) {
	c.n.Add(1)
	return c.Store.GetUser(ctx, id)
}

func (c countingUsers) UserGuilds(ctx context.Context, id snowflake.ID) ([]snowflake.ID, error) {
	c.n.Add(1)
	return c.Store.UserGuilds(ctx, id)
}

// countingApps counts the bot-store reads of lease renewals.
type countingApps struct {
	bots.Store
	n *atomic.Int64
}

func (c countingApps) GetInstallation(ctx context.Context, g, app snowflake.ID) (bots.Installation, error) {
	c.n.Add(1)
	return c.Store.GetInstallation(ctx, g, app)
}

func (c countingApps) ApplicationByBot(ctx context.Context, bot snowflake.ID) (bots.Application, error) {
	c.n.Add(1)
	return c.Store.ApplicationByBot(ctx, bot)
}

// nopEnforcer acts on nothing (the load sessions have no sockets).
type nopEnforcer struct{}

func (nopEnforcer) RevokeGuild(context.Context, event.Session, snowflake.ID)       {}
func (nopEnforcer) CloseBot(context.Context, snowflake.ID, entitlement.Reason) int { return 0 }

// measureRenewalLoad writes n bots (user, application, membership and
// installation in one guild) to the platform's stores, holds one session
// of each in a Manager with the default configuration reading them
// through the process's Source, and counts Source grants and store reads
// over window once the admissions are done.
func measureRenewalLoad(t *testing.T, w *revWorld, n int, window time.Duration) {
	ctx := context.Background()
	base := snowflake.ID(1) << 60
	for i := range n {
		bot, app := base+snowflake.ID(2*i), base+snowflake.ID(2*i+1)
		if err := w.p.Store().PutUser(ctx, store.User{ID: bot, Username: fmt.Sprintf("load-%d", i), Bot: true}); err != nil {
			t.Fatal(err)
		}
		if err := w.p.Bots().Store().CreateApplication(ctx, bots.Application{ID: app, BotUserID: bot, OwnerID: w.ownerID, Name: "load"}); err != nil {
			t.Fatal(err)
		}
		if err := w.p.Store().PutMember(ctx, store.Member{GuildID: w.guild, UserID: bot, JoinedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if err := w.p.Bots().Store().PutInstallation(ctx, bots.Installation{GuildID: w.guild, ApplicationID: app, BotUserID: bot}); err != nil {
			t.Fatal(err)
		}
	}
	var reads atomic.Int64
	src := entitlement.NewFaultySource(apirole.NewInstallSource(countingApps{w.p.Bots().Store(), &reads}, countingUsers{w.p.Store(), &reads}), 1)
	m, err := entitlement.New(entitlement.Config{}, src, nopEnforcer{}, entitlement.NewMemBus())
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); m.Run(rctx) }()
	defer func() { cancel(); <-done }()
	<-m.Connected()
	for i := range n {
		bot := base + snowflake.ID(2*i)
		if err := m.Admit(ctx, bot); err != nil {
			t.Fatal(err)
		}
		m.Attach(event.Session{ID: event.SessionID(fmt.Sprintf("load-%d", i)), UserID: bot, Bot: true})
	}
	g0, r0, t0 := src.Reads(), reads.Load(), time.Now()
	<-time.After(window) // the measurement window
	grants, storeReads, el := src.Reads()-g0, reads.Load()-r0, time.Since(t0).Seconds()
	per := 1000 / float64(n)
	fmt.Printf("claim 9c: renewal load of %d bot sessions (1 guild each, TTL %v, renewed every %v) over %.1f s: "+
		"%.1f grants/s, %.1f store reads/s = %.1f grants/s and %.1f store reads/s per 1,000 bot sessions\n",
		n, m.Config().TTL, m.Config().RenewEvery, el, float64(grants)/el, float64(storeReads)/el, float64(grants)/el*per, float64(storeReads)/el*per)
	want := float64(n) / m.Config().RenewEvery.Seconds()
	if got := float64(grants) / el; got < 0.8*want || got > 1.2*want {
		t.Fatalf("renewals %.1f/s, want about %.1f/s (one per session every %v)", got, want, m.Config().RenewEvery)
	}
}
