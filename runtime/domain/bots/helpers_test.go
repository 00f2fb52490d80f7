package bots_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/auth"
	"github.com/concord-chat/concord/runtime/domain/bots"
	"github.com/concord-chat/concord/runtime/domain/bots/pebble"
	"github.com/concord-chat/concord/runtime/domain/permissions"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// fakeClock is a manual clock: AfterFunc timers fire, synchronously, in
// Advance.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c       *fakeClock
	at      time.Time
	f       func()
	stopped bool
	fired   bool
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.stopped && !t.fired
	t.stopped = true
	return was
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) bots.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

// Advance moves time forward and runs the timers that came due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*fakeTimer
	for _, t := range c.timers {
		if !t.stopped && !t.fired && !t.at.After(c.now) {
			t.fired = true
			due = append(due, t)
		}
	}
	c.mu.Unlock()
	for _, t := range due {
		t.f()
	}
}

// pending counts timers that have neither fired nor been stopped.
func (c *fakeClock) pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if !t.stopped && !t.fired {
			n++
		}
	}
	return n
}

// fakeUsers is store.Users in memory.
type fakeUsers struct {
	mu    sync.Mutex
	users map[snowflake.ID]store.User
}

func (u *fakeUsers) CreateUser(_ context.Context, user store.User) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, x := range u.users {
		if x.Username == user.Username {
			return store.ErrExists
		}
	}
	u.users[user.ID] = user
	return nil
}

func (u *fakeUsers) PutUser(_ context.Context, user store.User) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.users[user.ID] = user
	return nil
}

func (u *fakeUsers) GetUser(_ context.Context, id snowflake.ID) (store.User, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	x, ok := u.users[id]
	if !ok {
		return store.User{}, store.ErrNotFound
	}
	return x, nil
}

func (u *fakeUsers) GetUserByName(_ context.Context, name string) (store.User, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, x := range u.users {
		if x.Username == name {
			return x, nil
		}
	}
	return store.User{}, store.ErrNotFound
}

// fakeGuilds is one-level guild state: per guild, each member's
// permissions (the same in every channel) and the channels.
type fakeGuilds struct {
	mu       sync.Mutex
	perms    map[snowflake.ID]map[snowflake.ID]permissions.Bits // guild → user → perms
	channels map[snowflake.ID]snowflake.ID                      // channel → guild
	installs []string
	nextRole snowflake.ID
}

func (g *fakeGuilds) AuthorizeGuild(_ context.Context, userID, guildID snowflake.ID, need permissions.Bits) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	m, ok := g.perms[guildID]
	if !ok {
		return bots.ErrUnknownGuild
	}
	p, ok := m[userID]
	if !ok {
		return bots.ErrMissingAccess
	}
	if !p.Has(need) {
		return bots.ErrMissingPermissions
	}
	return nil
}

func (g *fakeGuilds) InstallBot(ctx context.Context, installerID, guildID, botUserID snowflake.ID, name string, perms permissions.Bits) (snowflake.ID, error) {
	if err := g.AuthorizeGuild(ctx, installerID, guildID, permissions.ManageGuild|perms); err != nil {
		return 0, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.perms[guildID][botUserID] = perms
	g.nextRole++
	g.installs = append(g.installs, fmt.Sprintf("install %d in %d as %q with %d", botUserID, guildID, name, perms))
	return g.nextRole, nil
}

func (g *fakeGuilds) UninstallBot(_ context.Context, guildID, botUserID snowflake.ID) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.perms[guildID], botUserID)
	g.installs = append(g.installs, fmt.Sprintf("uninstall %d from %d", botUserID, guildID))
	return nil
}

func (g *fakeGuilds) Channel(_ context.Context, channelID snowflake.ID) (wire.Channel, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	gid, ok := g.channels[channelID]
	if !ok {
		return wire.Channel{}, bots.ErrUnknownChannel
	}
	name := "general"
	return wire.Channel{ID: channelID, GuildID: gid, Name: &name, PermissionOverwrites: []wire.Overwrite{}}, nil
}

func (g *fakeGuilds) ChannelPermissions(_ context.Context, userID, channelID snowflake.ID) (permissions.Bits, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	gid, ok := g.channels[channelID]
	if !ok {
		return 0, bots.ErrUnknownChannel
	}
	p, ok := g.perms[gid][userID]
	if !ok {
		return 0, bots.ErrUnknownMember
	}
	return p, nil
}

func (g *fakeGuilds) Member(_ context.Context, guildID, userID snowflake.ID) (wire.Member, error) {
	u := wire.User{ID: userID, Username: fmt.Sprint("user", userID), Discriminator: "0"}
	return wire.Member{User: &u, Roles: []snowflake.ID{}}, nil
}

func (g *fakeGuilds) User(_ context.Context, userID snowflake.ID) (wire.User, error) {
	return wire.User{ID: userID, Username: fmt.Sprint("user", userID), Discriminator: "0"}, nil
}

// Roles returns the guild's @everyone role and role 77 "mods".
func (g *fakeGuilds) Roles(_ context.Context, _, guildID snowflake.ID) ([]wire.Role, error) {
	return []wire.Role{{ID: guildID, Name: "@everyone"}, {ID: 77, Name: "mods", Position: 1}}, nil
}

func (g *fakeGuilds) setPerms(guildID, userID snowflake.ID, p permissions.Bits) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.perms[guildID][userID] = p
}

// delivery is one recorded gateway dispatch.
type delivery struct {
	UserID, GuildID snowflake.ID
	Type            string
	Payload         json.RawMessage
}

// fakeDispatcher records dispatches; users in online have one session.
type fakeDispatcher struct {
	mu     sync.Mutex
	online map[snowflake.ID]bool
	got    []delivery
}

func (d *fakeDispatcher) DeliverToUser(_ context.Context, userID, guildID snowflake.ID, eventType string, payload json.RawMessage) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.got = append(d.got, delivery{userID, guildID, eventType, payload})
	if d.online[userID] {
		return 1
	}
	return 0
}

func (d *fakeDispatcher) deliveries() []delivery {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]delivery(nil), d.got...)
}

// fakeMessages keeps messages in memory and records ephemeral recipients.
type fakeMessages struct {
	mu   sync.Mutex
	next snowflake.ID
	msgs map[snowflake.ID]wire.Message
	to   map[snowflake.ID]snowflake.ID // ephemeral message → recipient
	log  []bots.NewMessage
}

func (m *fakeMessages) CreateMessage(_ context.Context, nm bots.NewMessage) (wire.Message, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.next++
	msg := wire.Message{
		ID: 900000 + m.next, ChannelID: nm.ChannelID, GuildID: nm.GuildID, Author: wire.User{ID: nm.AuthorID},
		Content: nm.Content, Flags: nm.Flags, Type: nm.Type, Embeds: nm.Embeds, Components: nm.Components,
		Mentions: []wire.User{}, MentionRoles: []snowflake.ID{}, Attachments: []wire.Attachment{},
	}
	m.msgs[msg.ID] = msg
	if nm.EphemeralTo != 0 {
		m.to[msg.ID] = nm.EphemeralTo
	}
	m.log = append(m.log, nm)
	return msg, nil
}

func (m *fakeMessages) EditMessage(_ context.Context, e bots.MessageEdit) (wire.Message, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	msg, ok := m.msgs[e.MessageID]
	if !ok || msg.ChannelID != e.ChannelID {
		return wire.Message{}, bots.ErrUnknownMessage
	}
	if e.Content != nil {
		msg.Content = *e.Content
	}
	if e.Flags != nil {
		msg.Flags = *e.Flags
	}
	if e.Components != nil {
		msg.Components = *e.Components
	}
	m.msgs[e.MessageID] = msg
	return msg, nil
}

func (m *fakeMessages) GetMessage(_ context.Context, channelID, messageID snowflake.ID) (wire.Message, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	msg, ok := m.msgs[messageID]
	if !ok || msg.ChannelID != channelID {
		return wire.Message{}, bots.ErrUnknownMessage
	}
	return msg, nil
}

func (m *fakeMessages) DeleteMessage(_ context.Context, channelID, messageID, _ snowflake.ID) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.msgs[messageID]; !ok {
		return bots.ErrUnknownMessage
	}
	delete(m.msgs, messageID)
	return nil
}

func (m *fakeMessages) created() []bots.NewMessage {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]bots.NewMessage(nil), m.log...)
}

// Fixed ids of the test world.
const (
	guildID   snowflake.ID = 5000
	channelID snowflake.ID = 5001
	otherChan snowflake.ID = 6001 // in a guild the bot is not in
	otherGild snowflake.ID = 6000
)

// env is a Handler mounted on an httptest server with recording fakes.
type env struct {
	t        *testing.T
	h        *bots.Handler
	srv      *httptest.Server
	clock    *fakeClock
	users    *fakeUsers
	issuer   *auth.Issuer
	guilds   *fakeGuilds
	dispatch *fakeDispatcher
	messages *fakeMessages
	store    bots.Store
	dir      string
	resets   []snowflake.ID
	reg      *prometheus.Registry
	ids      *snowflake.Generator
	// owner and member are user tokens; admin has MANAGE_GUILD.
	ownerID, adminID, memberID snowflake.ID
	owner, admin, member       string
}

type envOption func(*bots.Config, *bots.Deps)

func newEnv(t *testing.T, opts ...envOption) *env {
	t.Helper()
	e := &env{
		t:        t,
		clock:    &fakeClock{now: time.Now().UTC()}, // aligned with the id generator
		users:    &fakeUsers{users: map[snowflake.ID]store.User{}},
		dispatch: &fakeDispatcher{online: map[snowflake.ID]bool{}},
		messages: &fakeMessages{msgs: map[snowflake.ID]wire.Message{}, to: map[snowflake.ID]snowflake.ID{}},
		reg:      prometheus.NewRegistry(),
		guilds: &fakeGuilds{
			perms:    map[snowflake.ID]map[snowflake.ID]permissions.Bits{guildID: {}, otherGild: {}},
			channels: map[snowflake.ID]snowflake.ID{channelID: guildID, otherChan: otherGild},
			nextRole: 7000,
		},
	}
	var err error
	if e.ids, err = snowflake.New(snowflake.Config{Worker: 1}); err != nil {
		t.Fatal(err)
	}
	if e.issuer, err = auth.New(auth.Config{Key: bytes.Repeat([]byte("k"), 32)}, e.users); err != nil {
		t.Fatal(err)
	}
	e.dir = t.TempDir()
	st, err := pebble.New(pebble.Config{Dir: e.dir})
	if err != nil {
		t.Fatal(err)
	}
	e.store = st
	e.ownerID, e.owner = e.user("owner", 0)
	e.adminID, e.admin = e.user("admin", permissions.ManageGuild|permissions.ViewChannel|permissions.SendMessages|permissions.UseApplicationCommands)
	e.memberID, e.member = e.user("member", permissions.ViewChannel|permissions.SendMessages|permissions.UseApplicationCommands)

	cfg := bots.Config{Key: bytes.Repeat([]byte("s"), 32), Clock: e.clock, Registerer: e.reg}
	deps := bots.Deps{
		Store: st, Users: e.users, Tokens: e.issuer, IDs: e.ids, Guilds: e.guilds, Dispatcher: e.dispatch,
		Messages: e.messages, Egress: noEgress{},
		TokenReset: func(_ context.Context, id snowflake.ID) { e.resets = append(e.resets, id) },
		Authenticate: func(r *http.Request) (snowflake.ID, bool, error) {
			id, err := e.issuer.Verify(r.Context(), auth.StripPrefix(r.Header.Get("Authorization")))
			if err != nil {
				return 0, false, err
			}
			u, err := e.users.GetUser(r.Context(), id)
			return id, u.Bot, err
		},
	}
	for _, o := range opts {
		o(&cfg, &deps)
	}
	if e.h, err = bots.NewHandler(cfg, deps); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	e.h.Register(mux, "")
	e.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		e.srv.Close()
		e.h.Close()
		st.Close()
	})
	return e
}

// user creates a user; perms > 0 makes it a member of guildID.
func (e *env) user(name string, perms permissions.Bits) (snowflake.ID, string) {
	id, _ := e.ids.Next()
	u := store.User{ID: id, Username: name}
	if err := e.users.CreateUser(context.Background(), u); err != nil {
		e.t.Fatal(err)
	}
	if perms != 0 {
		e.guilds.setPerms(guildID, id, perms)
	}
	return id, e.issuer.Mint(u)
}

// noEgress fails every outbound request (tests that need one set Egress).
type noEgress struct{}

func (noEgress) Do(*http.Request) (*http.Response, error) {
	return nil, fmt.Errorf("egress disabled in this test")
}

// response is a decoded answer.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
	return m
}

// code returns the Discord error code of an error answer.
func (r response) code(t *testing.T) int {
	t.Helper()
	c, _ := r.json(t)["code"].(float64)
	return int(c)
}

// do sends a request with an optional token and JSON body.
func (e *env) do(method, path, token string, body any) response {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		if s, ok := body.(string); ok {
			rd = strings.NewReader(s)
		} else {
			b, err := json.Marshal(body)
			if err != nil {
				e.t.Fatal(err)
			}
			rd = bytes.NewReader(b)
		}
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bot "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if len(b) > 0 && resp.Header.Get("Content-Type") != "application/json" {
		e.t.Fatalf("%s %s: Content-Type %q", method, path, resp.Header.Get("Content-Type"))
	}
	return response{resp.StatusCode, resp.Header, b}
}

// expect fails unless the answer has the status (and, for errors, code).
func (e *env) expect(r response, status, code int) map[string]any {
	e.t.Helper()
	if r.Status != status {
		e.t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	if len(r.Body) == 0 {
		return nil
	}
	if code != 0 && r.code(e.t) != code {
		e.t.Fatalf("code %d, want %d: %s", r.code(e.t), code, r.Body)
	}
	if r.Body[0] == '[' {
		return nil
	}
	return r.json(e.t)
}

// app is a created application with its bot token.
type app struct {
	ID, BotID snowflake.ID
	Token     string
	VerifyKey string
}

// createApp registers an application owned by the owner user.
func (e *env) createApp(name string) app {
	e.t.Helper()
	m := e.expect(e.do("POST", "/api/v10/applications", e.owner, map[string]any{"name": name}), 201, 0)
	id, _ := snowflake.Parse(m["id"].(string))
	bot := m["bot"].(map[string]any)
	botID, _ := snowflake.Parse(bot["id"].(string))
	return app{ID: id, BotID: botID, Token: m["token"].(string), VerifyKey: m["verify_key"].(string)}
}

// install installs a into guildID with perms, as the admin.
func (e *env) install(a app, perms permissions.Bits) {
	e.t.Helper()
	e.expect(e.do("POST", fmt.Sprintf("/api/v10/oauth2/authorize?client_id=%d&scope=bot", a.ID), e.admin,
		map[string]any{"guild_id": guildID.String(), "permissions": perms.String(), "authorize": true}), 200, 0)
}

// command registers a global chat-input command and returns its id.
func (e *env) command(a app, name string) snowflake.ID {
	e.t.Helper()
	m := e.expect(e.do("POST", fmt.Sprintf("/api/v10/applications/%d/commands", a.ID), a.Token,
		map[string]any{"name": name, "description": "does " + name}), 201, 0)
	id, _ := snowflake.Parse(m["id"].(string))
	return id
}

// invoke runs a command as the member and returns the delivered
// interaction (id and token) from the gateway dispatch.
func (e *env) invoke(a app, cmd snowflake.ID) (snowflake.ID, string) {
	e.t.Helper()
	before := len(e.dispatch.deliveries())
	e.expect(e.do("POST", "/api/v10/interactions", e.member, map[string]any{
		"type": 2, "application_id": a.ID.String(), "guild_id": guildID.String(), "channel_id": channelID.String(),
		"data": map[string]any{"id": cmd.String(), "type": 1},
	}), 204, 0)
	d := e.dispatch.deliveries()
	if len(d) != before+1 || d[before].Type != "INTERACTION_CREATE" {
		e.t.Fatalf("no INTERACTION_CREATE dispatched: %+v", d)
	}
	var p struct {
		ID    snowflake.ID `json:"id"`
		Token string       `json:"token"`
	}
	if err := json.Unmarshal(d[before].Payload, &p); err != nil {
		e.t.Fatal(err)
	}
	return p.ID, p.Token
}

// counter reads a counter's value from the registry.
func (e *env) counter(name string, labels map[string]string) float64 {
	e.t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue next
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

func sortedKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
