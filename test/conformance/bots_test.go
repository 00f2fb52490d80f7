package conformance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/concord-chat/concord/internal/gwtest"
	concordapp "github.com/concord-chat/concord/runtime/app"
	"github.com/concord-chat/concord/runtime/config"
)

// startServerWith starts a server like startServer after mutate changed
// its configuration. With CONCORD_TEST_REDIS (or CONCORD_REDIS) set, as
// make test does, the counters live in that Redis under a fresh prefix.
func startServerWith(t *testing.T, mutate func(*config.Config)) *server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cfg := config.Default()
	cfg.Roles = concordapp.DefaultTables().Names()
	cfg.DataDir = t.TempDir()
	cfg.DevUser = false
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if os.Getenv("CONCORD_TEST_VERBOSE") != "" {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if s := os.Getenv("CONCORD_CONFORMANCE_STORE"); s != "" {
		cfg.Store = s
	}
	addr := os.Getenv("CONCORD_TEST_REDIS") // what hack/redis/start.sh exports
	if addr == "" {
		addr = os.Getenv("CONCORD_REDIS")
	}
	if addr != "" {
		var b [6]byte
		_, _ = rand.Read(b[:])
		cfg.Redis = "redis://" + addr + "?prefix=concord-conformance-" + hex.EncodeToString(b[:]) + ":"
	}
	if mutate != nil {
		mutate(&cfg)
	}
	if clusterTopology(t) {
		cancel()
		var b [3]byte
		_, _ = rand.Read(b[:])
		s := &server{t: t, direct: startCluster(t, cfg), suffix: "-" + hex.EncodeToString(b[:])}
		s.proxy = startProxy(t, s.direct)
		return s
	}
	cfg.HTTP = "127.0.0.1:0"
	p, err := concordapp.Open(ctx, cfg, concordapp.Options{})
	if err != nil {
		cancel()
		t.Fatalf("start platform: %v", err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Serve(ctx) }()
	s := &server{t: t, platform: p, direct: p.HTTPAddr()}
	s.proxy = startProxy(t, s.direct)
	t.Cleanup(func() {
		cancel()
		<-done
		p.Close()
	})
	return s
}

// app is an application with its bot user and token.
type app struct {
	ID    string
	BotID string
	Token string
	bot   *rest
}

// createApp creates an application owned by owner; its bot's token is
// reset once through REST, as a developer does before running the bot.
func createApp(t *testing.T, s *server, owner *rest, name string) app {
	t.Helper()
	var out struct {
		ID  string `json:"id"`
		Bot struct {
			ID  string `json:"id"`
			Bot bool   `json:"bot"`
		} `json:"bot"`
		Token string `json:"token"`
	}
	owner.do("POST", "/applications", map[string]any{"name": name}, &out)
	if out.ID == "" || !out.Bot.Bot || out.ID != out.Bot.ID { // the bot user shares the application's id, as on Discord
		t.Fatalf("create application: %+v", out)
	}
	var reset struct {
		Token string `json:"token"`
	}
	owner.do("POST", "/applications/"+out.ID+"/bot/reset", nil, &reset)
	if reset.Token == "" || reset.Token == out.Token {
		t.Fatalf("bot/reset token %q (creation token %q)", reset.Token, out.Token)
	}
	return app{ID: out.ID, BotID: out.Bot.ID, Token: reset.Token, bot: &rest{t: t, base: s.base(), token: "Bot " + reset.Token}}
}

// install adds the application's bot to a guild with permissions, as
// owner (who has MANAGE_GUILD).
func install(t *testing.T, owner *rest, a app, guildID string, perms uint64) string {
	t.Helper()
	var out struct {
		RoleID string `json:"role_id"`
	}
	p := strconv.FormatUint(perms, 10)
	owner.do("POST", "/oauth2/authorize?client_id="+a.ID+"&scope=bot&permissions="+p,
		map[string]any{"guild_id": guildID, "permissions": p, "authorize": true}, &out)
	if out.RoleID == "" {
		t.Fatalf("authorize %s in %s: no role", a.ID, guildID)
	}
	return out.RoleID
}

// newGuild creates a guild as owner and returns its id and first text
// channel.
func newGuild(t *testing.T, owner *rest, name string) (guildID, channelID string) {
	t.Helper()
	var g struct {
		ID string `json:"id"`
	}
	owner.do("POST", "/guilds", map[string]string{"name": name}, &g)
	var chans []struct {
		ID   string `json:"id"`
		Type int    `json:"type"`
	}
	owner.do("GET", "/guilds/"+g.ID+"/channels", nil, &chans)
	for _, c := range chans {
		if c.Type == 0 {
			return g.ID, c.ID
		}
	}
	t.Fatalf("guild %s has no text channel: %+v", g.ID, chans)
	return "", ""
}

// Permission bits used by these tests.
const (
	permViewChannel  = 1 << 10
	permSendMessages = 1 << 11
	permReadHistory  = 1 << 16
)

// identifyResult is how a gateway session answered IDENTIFY.
type identifyResult struct {
	// Ready is READY's payload when it came.
	Ready map[string]any
	// Invalid is an op 9 INVALID_SESSION.
	Invalid bool
	// CloseCode is the close code when the session was closed instead.
	CloseCode int
}

// gatewayIdentify opens a gateway session (the shared test client),
// identifies with intents and reports the answer: READY, op 9, or a
// close code; err is set when none of them came.
func gatewayIdentify(t *testing.T, s *server, token string, intents uint64) (identifyResult, error) {
	t.Helper()
	c, err := gwtest.Dial(gwtest.URL(s.proxy.addr()), token, gwtest.Options{Name: "conformance", Intents: intents})
	if err != nil {
		t.Fatalf("gateway: %v", err)
	}
	defer c.Close()
	err = c.Await("READY", 20*time.Second, func(fs []gwtest.Frame) bool { return len(fs) > 0 || c.InvalidSession() })
	var r identifyResult
	switch fs := c.Frames(); {
	case len(fs) > 0 && fs[0].Type == "READY":
		if err := json.Unmarshal(fs[0].D, &r.Ready); err != nil {
			t.Fatalf("READY: %v", err)
		}
		return r, nil
	case c.InvalidSession():
		r.Invalid = true
		return r, nil
	case c.CloseCode() != 0:
		r.CloseCode = c.CloseCode()
		return r, nil
	}
	return r, fmt.Errorf("no READY, op 9 or close code: %v", err)
}

// TestBotPrivilegedIntents checks that an application bot asking for a
// privileged intent its owner did not enable is closed with 4014, and
// that READY names the application (not the bot user) otherwise.
func TestBotPrivilegedIntents(t *testing.T) {
	s := startServerWith(t, nil)
	owner, _ := s.register("intents-owner")
	a := createApp(t, s, owner, "Intents")

	const guildMembers = 1 << 1
	if r, err := gatewayIdentify(t, s, a.Token, 1|guildMembers); err != nil || r.CloseCode != 4014 {
		t.Fatalf("IDENTIFY with GUILD_MEMBERS not enabled: %+v %v, want close 4014", r, err)
	}

	r, err := gatewayIdentify(t, s, a.Token, 1)
	if err != nil || r.Ready == nil {
		t.Fatalf("IDENTIFY with GUILDS: %+v %v, want READY", r, err)
	}
	application, _ := r.Ready["application"].(map[string]any)
	if application["id"] != a.ID {
		t.Fatalf("READY application = %v, want id %s (READY %v)", application, a.ID, r.Ready)
	}
}

// TestBotRateLimitHeaders checks the rate-limit headers on REST responses and a
// 429 with Via and Retry-After once an application bot exceeds the
// message route's bucket (5 per 5 s per channel).
func TestBotRateLimitHeaders(t *testing.T) {
	s := startServerWith(t, nil)
	owner, _ := s.register("limits-owner")
	guildID, channelID := newGuild(t, owner, "Rate limits")
	a := createApp(t, s, owner, "Limited")
	install(t, owner, a, guildID, permViewChannel|permSendMessages)

	post := func() *http.Response {
		req, err := http.NewRequest("POST", s.base()+"/channels/"+channelID+"/messages", strings.NewReader(`{"content":"hi"}`))
		must(t, err, "request")
		req.Header.Set("Authorization", "Bot "+a.Token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		must(t, err, "post")
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	first := post()
	if first.StatusCode != http.StatusOK {
		t.Fatalf("first post: status %d", first.StatusCode)
	}
	for _, h := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "X-RateLimit-Reset-After", "X-RateLimit-Bucket"} {
		if first.Header.Get(h) == "" {
			t.Errorf("first post lacks %s (headers %v)", h, first.Header)
		}
	}
	if got := first.Header.Get("X-RateLimit-Limit"); got != "5" {
		t.Errorf("X-RateLimit-Limit = %q, want 5", got)
	}
	if got := first.Header.Get("X-RateLimit-Remaining"); got != "4" {
		t.Errorf("X-RateLimit-Remaining = %q, want 4", got)
	}
	var limited *http.Response
	for i := 0; i < 10 && limited == nil; i++ {
		if r := post(); r.StatusCode == http.StatusTooManyRequests {
			limited = r
		}
	}
	if limited == nil {
		t.Fatal("no 429 after 11 posts in one channel")
	}
	if limited.Header.Get("Via") == "" || limited.Header.Get("Retry-After") == "" {
		t.Fatalf("429 lacks Via or Retry-After: %v", limited.Header)
	}
	if limited.Header.Get("X-RateLimit-Remaining") != "0" {
		t.Errorf("429 X-RateLimit-Remaining = %q, want 0", limited.Header.Get("X-RateLimit-Remaining"))
	}

	// Removing the bot takes effect on its next call.
	if code := owner.do("DELETE", "/guilds/"+guildID+"/integrations/"+a.ID, nil, nil); code != http.StatusNoContent {
		t.Fatalf("remove integration: status %d", code)
	}
	var ch json.RawMessage
	if code := a.bot.do("GET", "/channels/"+channelID, nil, nil); code < 400 {
		t.Fatalf("removed bot reads the channel: status %d %s", code, ch)
	}
}

// TestBotInstallPermissions drives an installation through REST: the
// bot's effective permissions are its managed role's, narrowing the role
// by authorizing again applies to the bot's next call, a bot never acts
// on a member ranked above it, and kicking the bot removes its managed
// role.
func TestBotInstallPermissions(t *testing.T) {
	s := startServerWith(t, nil)
	owner, _ := s.register("perms-owner")
	guildID, channelID := newGuild(t, owner, "Permissions")
	var inv struct {
		Code string `json:"code"`
	}
	owner.do("POST", "/channels/"+channelID+"/invites", map[string]any{}, &inv)
	join := func(name string) string {
		u, id := s.register(name)
		u.do("POST", "/invites/"+inv.Code, map[string]any{}, &map[string]any{})
		return id
	}
	first, second, ranked := join("perms-first"), join("perms-second"), join("perms-ranked")
	var high struct {
		ID string `json:"id"`
	}
	owner.do("POST", "/guilds/"+guildID+"/roles", map[string]any{"name": "high"}, &high)
	if code := owner.do("PUT", "/guilds/"+guildID+"/members/"+ranked+"/roles/"+high.ID, nil, nil); code != http.StatusNoContent {
		t.Fatalf("give role: status %d", code)
	}
	a := createApp(t, s, owner, "Moderator")
	const permKick = 1 << 1
	// The bot's managed role enters at position 1, below "high".
	roleID := install(t, owner, a, guildID, permViewChannel|permKick)
	if code := a.bot.do("DELETE", "/guilds/"+guildID+"/members/"+ranked, nil, nil); code != http.StatusForbidden {
		t.Fatalf("bot kicks a member ranked above it: status %d, want 403", code)
	}
	if code := a.bot.do("DELETE", "/guilds/"+guildID+"/members/"+first, nil, nil); code != http.StatusNoContent {
		t.Fatalf("bot kicks with KICK_MEMBERS: status %d, want 204", code)
	}

	// Authorizing again with fewer bits narrows the same role.
	if again := install(t, owner, a, guildID, permViewChannel); again != roleID {
		t.Fatalf("reinstall role %s, want %s", again, roleID)
	}
	if code := a.bot.do("DELETE", "/guilds/"+guildID+"/members/"+second, nil, nil); code != http.StatusForbidden {
		t.Fatalf("bot kicks after KICK_MEMBERS was narrowed away: status %d, want 403", code)
	}

	// The owner kicks the bot: its managed role goes with it.
	if code := owner.do("DELETE", "/guilds/"+guildID+"/members/"+a.BotID, nil, nil); code != http.StatusNoContent {
		t.Fatalf("kick bot: status %d", code)
	}
	var roles []struct {
		ID string `json:"id"`
	}
	owner.do("GET", "/guilds/"+guildID+"/roles", nil, &roles)
	for _, r := range roles {
		if r.ID == roleID {
			t.Fatalf("managed role %s survived the bot's kick", roleID)
		}
	}
	if code := a.bot.do("GET", "/channels/"+channelID, nil, nil); code < 400 {
		t.Fatalf("kicked bot reads the channel: status %d", code)
	}
}

// TestBotIdentifyAdmission checks identify admission over a real socket:
// with max_concurrency 1 a bot's second IDENTIFY inside 5 s is refused,
// while a user account is not limited. The refusal is close 4000 until
// the gateway maps admission errors to op 9; the
// test accepts either.
func TestBotIdentifyAdmission(t *testing.T) {
	s := startServerWith(t, nil)
	owner, _ := s.register("admission-owner")
	a := createApp(t, s, owner, "Admitted")
	if r, err := gatewayIdentify(t, s, a.Token, 1); err != nil || r.Ready == nil {
		t.Fatalf("first IDENTIFY: %+v %v, want READY", r, err)
	}
	if r, err := gatewayIdentify(t, s, a.Token, 1); err != nil || !(r.Invalid || r.CloseCode == 4000) {
		t.Fatalf("second IDENTIFY within 5 s: %+v %v; want op 9 or close 4000", r, err)
	}
	var gb struct {
		SessionStartLimit struct {
			Remaining int `json:"remaining"`
		} `json:"session_start_limit"`
	}
	a.bot.do("GET", "/gateway/bot", nil, &gb)
	if gb.SessionStartLimit.Remaining != 999 {
		t.Fatalf("session_start_limit.remaining = %d, want 999 (refused identifies do not count)", gb.SessionStartLimit.Remaining)
	}
	for range 3 {
		if r, err := gatewayIdentify(t, s, strings.TrimPrefix(owner.token, "Bot "), 1); err != nil || r.Ready == nil {
			t.Fatalf("user IDENTIFY: %+v %v, want READY", r, err)
		}
	}
}
