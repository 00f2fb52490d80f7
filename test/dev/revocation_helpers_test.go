package dev

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concord-chat/concord/internal/gwtest"
	"github.com/concord-chat/concord/internal/resttest"
	"github.com/concord-chat/concord/runtime/app"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/config"
	"github.com/concord-chat/concord/runtime/domain/bots"
	"github.com/concord-chat/concord/runtime/domain/entitlement"
	"github.com/concord-chat/concord/runtime/domain/wire"
	"github.com/concord-chat/concord/runtime/services/apirole"
)

// revWorld is a running platform with an owner and an application whose
// bot is installed in one guild.
type revWorld struct {
	t        *testing.T
	p        *app.Node
	addr     string
	owner    string // "Bearer"-less user token
	ownerID  snowflake.ID
	appID    snowflake.ID
	botID    snowflake.ID
	botToken string
	guild    snowflake.ID
	channel  snowflake.ID
	msgID    atomic.Uint64
}

func parseID(t *testing.T, s string) snowflake.ID {
	t.Helper()
	id, err := snowflake.Parse(s)
	if err != nil {
		t.Fatalf("id %q: %v", s, err)
	}
	return id
}

// newRevWorld starts a platform with opts, registers an owner, creates an
// application (its bot token reset once, as a developer does) and
// installs it in a fresh guild.
func newRevWorld(t *testing.T, opts ...func(*config.Config)) *revWorld {
	t.Helper()
	p, addr := startTestPlatform(t, append([]func(*config.Config){func(c *config.Config) { c.Identify.Concurrency = 16 }}, opts...)...)
	w := &revWorld{t: t, p: p, addr: addr}
	var reg struct {
		Token  string `json:"token"`
		UserID string `json:"user_id"`
	}
	resttest.Call(t, addr, "", "POST", "/auth/register", map[string]string{"username": "rev-owner", "password": "correct horse battery"}, &reg)
	w.owner, w.ownerID = reg.Token, parseID(t, reg.UserID)
	var app struct {
		ID  string `json:"id"`
		Bot struct {
			ID string `json:"id"`
		} `json:"bot"`
	}
	resttest.Call(t, addr, w.owner, "POST", "/applications", map[string]any{"name": "revbot"}, &app)
	w.appID, w.botID = parseID(t, app.ID), parseID(t, app.Bot.ID)
	var reset struct {
		Token string `json:"token"`
	}
	resttest.Call(t, addr, w.owner, "POST", "/applications/"+app.ID+"/bot/reset", nil, &reset)
	w.botToken = reset.Token
	w.guild, w.channel = w.newInstalledGuild("rev")
	w.msgID.Store(uint64(w.channel) << 1)
	return w
}

// newInstalledGuild creates a guild with a text channel and installs the
// bot in it with VIEW_CHANNEL | SEND_MESSAGES.
func (w *revWorld) newInstalledGuild(name string) (guild, channel snowflake.ID) {
	w.t.Helper()
	var g, ch struct {
		ID string `json:"id"`
	}
	resttest.Call(w.t, w.addr, w.owner, "POST", "/guilds", map[string]string{"name": name}, &g)
	resttest.Call(w.t, w.addr, w.owner, "POST", "/guilds/"+g.ID+"/channels", map[string]any{"name": "events", "type": 0}, &ch)
	const perms = 1<<10 | 1<<11
	p := strconv.Itoa(perms)
	resttest.Call(w.t, w.addr, w.owner, "POST", "/oauth2/authorize?client_id="+w.appID.String()+"&scope=bot&permissions="+p,
		map[string]any{"guild_id": g.ID, "permissions": p, "authorize": true}, nil)
	return parseID(w.t, g.ID), parseID(w.t, ch.ID)
}

// post publishes one MESSAGE_CREATE in a guild channel through the guild
// service's fan-out path (REST's 5-per-5-s channel limit would cap the
// rate; what is measured is delivery, not the store).
func (w *revWorld) post(ctx context.Context, guild, channel snowflake.ID) error {
	now := time.Now()
	id := snowflake.ID(w.msgID.Add(1))
	m := wire.Message{ID: id, ChannelID: channel, GuildID: guild,
		Author:  wire.User{ID: w.ownerID, Username: "rev-owner", Discriminator: "0"},
		Content: "tick " + strconv.FormatInt(now.UnixNano(), 10), Timestamp: wire.NewTimestamp(now),
		Mentions: []wire.User{}, MentionRoles: []snowflake.ID{}, Attachments: []wire.Attachment{},
		Embeds: []json.RawMessage{}, Components: []json.RawMessage{}}
	return w.p.Guilds().Messages.Publish(ctx, "MESSAGE_CREATE", m)
}

// poster posts into a guild every interval until stopped.
type poster struct {
	cancel context.CancelFunc
	done   chan struct{}
	posted atomic.Int64
}

func (w *revWorld) startPoster(guild, channel snowflake.ID, every time.Duration) *poster {
	ctx, cancel := context.WithCancel(context.Background())
	p := &poster{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := w.post(ctx, guild, channel); err == nil {
					p.posted.Add(1)
				}
			}
		}
	}()
	w.t.Cleanup(p.stop)
	return p
}

func (p *poster) stop() { p.cancel(); <-p.done }

// botConn is a gateway client of the bot (gwtest) that records, per
// guild, when it last received a MESSAGE_CREATE and when GUILD_DELETE
// came.
type botConn struct {
	t    *testing.T
	conn *gwtest.Conn

	ready   chan struct{} // closed at READY
	invalid chan bool     // op 9 payloads
	closed  chan struct{} // closed when the connection ends
	code    int           // close code, valid after closed

	mu         sync.Mutex
	readyOnce  sync.Once
	created    map[snowflake.ID]chan struct{} // closed at GUILD_CREATE
	lastMsg    map[snowflake.ID]time.Time
	msgs       map[snowflake.ID]int
	deleted    map[snowflake.ID]time.Time
	afterDel   map[snowflake.ID]int // MESSAGE_CREATEs after GUILD_DELETE
	lastAnyMsg time.Time
}

// dialBot connects and identifies as the bot; it does not wait for READY.
func (w *revWorld) dialBot(token string) *botConn {
	w.t.Helper()
	b := &botConn{t: w.t, ready: make(chan struct{}), invalid: make(chan bool, 4), closed: make(chan struct{}),
		created: map[snowflake.ID]chan struct{}{}, lastMsg: map[snowflake.ID]time.Time{}, msgs: map[snowflake.ID]int{},
		deleted: map[snowflake.ID]time.Time{}, afterDel: map[snowflake.ID]int{}}
	conn, err := gwtest.Dial(gwtest.URL(w.addr), token, gwtest.Options{Name: "bot", Intents: 1<<0 | 1<<9, OnFrame: b.record})
	if err != nil {
		w.t.Fatal(err)
	}
	b.conn = conn
	go func() {
		<-conn.Done()
		b.code = conn.CloseCode()
		close(b.closed)
	}()
	w.t.Cleanup(func() { conn.Close(); <-b.closed })
	return b
}

// record files one frame; the gwtest reader calls it.
func (b *botConn) record(op int, f gwtest.Frame) {
	switch op {
	case 9:
		var resumable bool
		_ = json.Unmarshal(f.D, &resumable)
		select {
		case b.invalid <- resumable:
		default:
		}
	case 0:
		var d struct {
			ID      snowflake.ID `json:"id,string"`
			GuildID snowflake.ID `json:"guild_id,string"`
		}
		_ = json.Unmarshal(f.D, &d)
		now := f.At
		b.mu.Lock()
		defer b.mu.Unlock()
		switch f.Type {
		case "READY":
			b.readyOnce.Do(func() { close(b.ready) })
		case "GUILD_CREATE":
			if ch := b.createdCh(d.ID); !isClosed(ch) {
				close(ch)
			}
		case "GUILD_DELETE":
			if _, ok := b.deleted[d.ID]; !ok {
				b.deleted[d.ID] = now
			}
		case "MESSAGE_CREATE":
			b.lastMsg[d.GuildID] = now
			b.lastAnyMsg = now
			b.msgs[d.GuildID]++
			if _, ok := b.deleted[d.GuildID]; ok {
				b.afterDel[d.GuildID]++
			}
		}
	}
}

// createdCh returns the GUILD_CREATE channel of a guild. b.mu must be held.
func (b *botConn) createdCh(g snowflake.ID) chan struct{} {
	ch := b.created[g]
	if ch == nil {
		ch = make(chan struct{})
		b.created[g] = ch
	}
	return ch
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// waitReady waits for READY.
func (b *botConn) waitReady() {
	b.t.Helper()
	select {
	case <-b.ready:
	case <-b.closed:
		b.t.Fatalf("connection closed (code %d) before READY", b.code)
	case <-time.After(15 * time.Second):
		b.t.Fatal("no READY within 15 s")
	}
}

// waitGuild waits for the guild's GUILD_CREATE.
func (b *botConn) waitGuild(g snowflake.ID) {
	b.t.Helper()
	b.mu.Lock()
	ch := b.createdCh(g)
	b.mu.Unlock()
	select {
	case <-ch:
	case <-time.After(15 * time.Second):
		b.t.Fatalf("no GUILD_CREATE for %d within 15 s", g)
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(5 * time.Millisecond) // polling an observable condition
	}
}

// stats returns what the connection saw of a guild.
func (b *botConn) stats(g snowflake.ID) (last, deleted time.Time, msgs, afterDelete int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lastMsg[g], b.deleted[g], b.msgs[g], b.afterDel[g]
}

// waitClosed waits for the server to close the connection and returns
// the close code.
func (b *botConn) waitClosed(within time.Duration) (int, time.Time) {
	b.t.Helper()
	select {
	case <-b.closed:
		return b.code, time.Now()
	case <-time.After(within):
		b.t.Fatalf("connection still open after %s", within)
	}
	return 0, time.Time{}
}

// revocationResult is one measured revocation.
type revocationResult struct {
	// lastEvent is from the revocation to the bot's last MESSAGE_CREATE of
	// the guild (0 when none came after it).
	lastEvent time.Duration
	// guildDelete is from the revocation to GUILD_DELETE.
	guildDelete time.Duration
	// afterDelete counts MESSAGE_CREATEs of the guild after GUILD_DELETE.
	afterDelete int
}

// measureRevocation runs revoke while the poster posts into guild, waits
// for GUILD_DELETE (within limit), keeps posting for settle more and
// returns the measurement.
func (w *revWorld) measureRevocation(b *botConn, guild snowflake.ID, limit, settle time.Duration, revoke func()) revocationResult {
	w.t.Helper()
	t0 := time.Now()
	revoke()
	waitFor(w.t, limit, fmt.Sprintf("GUILD_DELETE of %d", guild), func() bool {
		_, del, _, _ := b.stats(guild)
		return !del.IsZero()
	})
	time.Sleep(settle) // the observation window after GUILD_DELETE: posting goes on
	last, del, _, after := b.stats(guild)
	r := revocationResult{guildDelete: del.Sub(t0), afterDelete: after}
	if last.After(t0) {
		r.lastEvent = last.Sub(t0)
	}
	return r
}

// ok2xx fails unless code is 2xx.
func ok2xx(t *testing.T, code int, what string) {
	t.Helper()
	if code < 200 || code >= 300 {
		t.Fatalf("%s: status %d", what, code)
	}
}

// restStatus calls the REST API and returns the status only.
func restStatus(t *testing.T, addr, token, method, path string) int {
	t.Helper()
	code, _, err := resttest.Do(context.Background(), nil, method, "http://"+addr+"/api/v10"+path, token, nil, nil)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return code
}

// counterValue sums the counter series of name whose label has value.
func counterValue(t *testing.T, p *app.Node, name, label, value string) float64 {
	t.Helper()
	mfs, err := p.Metrics().Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

// testLeases is the bot platform's revocation path as the tests drive it:
// its lease manager and fault injectors.
type testLeases struct {
	mgr    *entitlement.Manager
	source *entitlement.FaultySource
	bus    *entitlement.FaultyBus
	etcd   testRegistry
	bots   *apirole.Bots
}

// testRegistry stops and starts the embedded etcd the pushes travel
// through.
type testRegistry struct{ r *apirole.EmbeddedRegistry }

func (r testRegistry) halt()        { r.r.Stop() }
func (r testRegistry) start() error { return r.r.Start() }

// Revoked pushes a revocation as the bot platform does.
func (l *testLeases) Revoked(ctx context.Context, r bots.Revocation) error {
	return l.bots.Revoked(ctx, r)
}

// leasesOf is the revocation path of p's bot platform.
func leasesOf(p *app.Node) *testLeases {
	f := p.Bots().Faults()
	return &testLeases{mgr: p.Bots().Leases(), source: f.Source, bus: f.Bus, etcd: testRegistry{f.Registry}, bots: p.Bots()}
}
