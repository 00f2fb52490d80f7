//go:build integration

package cluster

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/concord-chat/concord/operator/fleet"
)

// movePoster posts to one channel as fast as the API answers, from
// several goroutines, and records each acknowledged message with when its
// answer arrived.
type movePoster struct {
	mu     sync.Mutex
	acked  []string
	at     map[string]time.Time
	errs   []string
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func startMovePoster(api rest, token, channel string, workers int) *movePoster {
	ctx, cancel := context.WithCancel(context.Background())
	p := &movePoster{at: map[string]time.Time{}, cancel: cancel}
	for w := range workers {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				var m struct {
					ID string `json:"id"`
				}
				rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				code, raw, err := api.do(rctx, token, http.MethodPost, "/channels/"+channel+"/messages",
					map[string]any{"content": fmt.Sprintf("load %d/%d", w, i)}, &m)
				cancel()
				p.mu.Lock()
				switch {
				case err == nil && code/100 == 2:
					p.acked = append(p.acked, m.ID)
					p.at[m.ID] = time.Now()
				case ctx.Err() == nil:
					p.errs = append(p.errs, fmt.Sprintf("%d %v %s", code, err, raw))
				}
				p.mu.Unlock()
			}
		}()
	}
	return p
}

// count is how many messages were acknowledged so far.
func (p *movePoster) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.acked)
}

// awaitMore waits until n more messages than now were acknowledged.
func (p *movePoster) awaitMore(t *testing.T, n int) {
	t.Helper()
	want := p.count() + n
	deadline := time.Now().Add(time.Minute)
	for p.count() < want {
		if time.Now().After(deadline) {
			t.Fatalf("%d messages acknowledged, want %d within a minute (errors: %v)", p.count(), want, p.errs)
		}
		time.Sleep(10 * time.Millisecond) // the posters' progress is counted, not signalled
	}
}

func (p *movePoster) stop() {
	p.cancel()
	p.wg.Wait()
}

// TestGuildMoveUnderLoadLosesNothing: a guild is moved onto a dedicated
// guild node and back (pin, unpin — what a GuildPlacement the autoscaler
// creates and later deletes does) while four posters keep its actor busy.
// Every message the API acknowledged, before, during and after each move,
// reaches every session of the guild exactly once: the new owner serves
// writes as soon as the API's ring names it while the gateway resubscribes
// the sessions one call at a time, and the resubscription after a move
// (flagged moved) gets what the new owner's actor dispatched before it
// arrived (guild.Service.AttachMovedSession).
func TestGuildMoveUnderLoadLosesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	env := setupCluster(t, ctx, "mv")
	common := env.nodeArgs()
	sharedAdmin := freeAddr(t)
	shared := startRole(t, "guild-1", "guild", common, "--admin="+sharedAdmin)
	app := startRole(t, "app-1", "gateway,api", common)
	deadline := time.Now().Add(30 * time.Second)
	shared.waitReady(t, deadline)
	app.waitReady(t, deadline)

	api := rest{addr: app.http, client: &http.Client{Timeout: 20 * time.Second}}
	token := register(t, api, "mv")
	guildID := createGuild(t, api, token, "moving guild")
	channel := firstChannel(t, api, token, guildID)
	var sessions []*wsSession
	for i := range 3 {
		s := dial(t, fmt.Sprintf("mv-session-%d", i), app.http, token)
		s.await(t, "GUILD_CREATE", 10*time.Second, func(fs []dispatch) bool { return len(guildCreates(fs, guildID)) == 1 })
		sessions = append(sessions, s)
	}
	dedAdmin := freeAddr(t)
	ded := startRole(t, "mv-guild-"+guildID, "guild", common, "--admin="+dedAdmin, "--guild-dedicated="+guildID)
	ded.waitReady(t, time.Now().Add(30*time.Second))
	awaitSamples(t, sharedAdmin, "the guild on the shared node", func(ss []fleet.GuildSample) bool { return hasGuild(ss, guildID, -1) })

	reg := env.registry(t)
	p := startMovePoster(api, token, channel, 4)
	defer p.stop()
	p.awaitMore(t, 50)
	pinned := time.Now()
	if err := reg.Pin(ctx, mustID(t, guildID), ded.name); err != nil {
		t.Fatal(err)
	}
	awaitSamples(t, dedAdmin, "the pinned guild on the dedicated node", func(ss []fleet.GuildSample) bool { return hasGuild(ss, guildID, -1) })
	p.awaitMore(t, 50)
	unpinned := time.Now()
	if err := reg.Unpin(ctx, mustID(t, guildID)); err != nil {
		t.Fatal(err)
	}
	awaitSamples(t, sharedAdmin, "the guild back on the shared node", func(ss []fleet.GuildSample) bool { return hasGuild(ss, guildID, -1) })
	p.awaitMore(t, 50)
	p.stop()

	p.mu.Lock()
	acked, at, errs := append([]string(nil), p.acked...), p.at, p.errs
	p.mu.Unlock()
	t.Logf("%d messages acknowledged across the two moves (%d requests failed: %v)", len(acked), len(errs), errs)
	for _, s := range sessions {
		err := s.Await("every acknowledged message", 30*time.Second, func(fs []dispatch) bool {
			got := map[string]bool{}
			for _, m := range messages(fs) {
				got[m.ID] = true
			}
			for _, id := range acked {
				if !got[id] {
					return false
				}
			}
			return true
		})
		if err == nil {
			// A move is invisible to the client, as on Discord: the
			// session's only GUILD_CREATE is the one of its IDENTIFY
			// (nothing in this guild needs the new owner to refresh it).
			if n := len(guildCreates(s.Frames(), guildID)); n != 1 {
				t.Errorf("%s: %d GUILD_CREATEs for the guild, want 1", s.name, n)
			}
			seen := map[string]int{}
			for _, m := range messages(s.Frames()) {
				seen[m.ID]++
			}
			for _, id := range acked {
				if seen[id] != 1 {
					t.Errorf("%s: message %s arrived %d times, want once", s.name, id, seen[id])
				}
			}
			continue
		}
		got := map[string]bool{}
		for _, m := range messages(s.Frames()) {
			got[m.ID] = true
		}
		var missing []string
		for _, id := range acked {
			if !got[id] {
				missing = append(missing, fmt.Sprintf("%s (acked %v after the pin, %v after the unpin)", id,
					at[id].Sub(pinned).Round(time.Millisecond), at[id].Sub(unpinned).Round(time.Millisecond)))
			}
		}
		sort.Strings(missing)
		t.Errorf("%s: %d of %d acknowledged messages never arrived: %v", s.name, len(missing), len(acked), missing)
	}
}
