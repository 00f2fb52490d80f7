package bots_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/bots"
)

func TestCreateApplicationAndBotToken(t *testing.T) {
	e := newEnv(t)
	a := e.createApp("Pinger")
	if key, err := hex.DecodeString(a.VerifyKey); err != nil || len(key) != 32 {
		t.Fatalf("verify_key %q is not a hex Ed25519 public key", a.VerifyKey)
	}

	// The bot token logs in; discord.py's startup reads these fields.
	m := e.expect(e.do("GET", "/api/v10/oauth2/applications/@me", a.Token, nil), 200, 0)
	for _, k := range []string{"id", "name", "description", "icon", "bot_public", "bot_require_code_grant", "verify_key", "owner", "flags", "team"} {
		if _, ok := m[k]; !ok {
			t.Errorf("GET /oauth2/applications/@me lacks %q: %v", k, sortedKeys(m))
		}
	}
	if m["id"] != a.ID.String() || m["verify_key"] != a.VerifyKey || m["owner"].(map[string]any)["id"] != e.ownerID.String() {
		t.Fatalf("application @me = %v", m)
	}
	if bot := m["bot"].(map[string]any); bot["bot"] != true || bot["id"] != a.BotID.String() || a.BotID != a.ID {
		t.Fatalf("bot user = %v, application %s: want the bot user to share the application's id", bot, a.ID)
	}
	// v9 is served too.
	e.expect(e.do("GET", "/api/v9/oauth2/applications/@me", a.Token, nil), 200, 0)

	// Only the owner resets; the old token dies, the new one works.
	e.expect(e.do("POST", fmt.Sprintf("/api/v10/applications/%d/bot/reset", a.ID), a.Token, nil), 403, 50013)
	r := e.expect(e.do("POST", fmt.Sprintf("/api/v10/applications/%d/bot/reset", a.ID), e.owner, nil), 200, 0)
	fresh := r["token"].(string)
	if fresh == a.Token {
		t.Fatal("reset returned the old token")
	}
	e.expect(e.do("GET", "/api/v10/oauth2/applications/@me", a.Token, nil), 401, 40001)
	e.expect(e.do("GET", "/api/v10/oauth2/applications/@me", fresh, nil), 200, 0)
	if len(e.resets) != 1 || e.resets[0] != a.BotID {
		t.Fatalf("TokenReset hook calls = %v", e.resets)
	}

	// Strangers do not see it.
	e.expect(e.do("GET", fmt.Sprintf("/api/v10/applications/%d", a.ID), e.member, nil), 404, 10002)
	e.expect(e.do("POST", fmt.Sprintf("/api/v10/applications/%d/bot/reset", a.ID), e.member, nil), 404, 10002)
	e.expect(e.do("GET", fmt.Sprintf("/api/v10/applications/%d", a.ID), e.owner, nil), 200, 0)
	if r := e.do("GET", "/api/v10/applications", e.owner, nil); r.Status != 200 || !strings.Contains(string(r.Body), `"id":"`+a.ID.String()+`"`) {
		t.Fatalf("GET /applications = %d %s", r.Status, r.Body)
	}
	if r := e.do("GET", "/api/v10/applications", e.member, nil); string(r.Body) != "[]" {
		t.Fatalf("a stranger lists %s", r.Body)
	}
}

func TestCreateApplicationRefusals(t *testing.T) {
	e := newEnv(t)
	a := e.createApp("Dup")
	// A second application with the same name gets a suffixed bot user.
	b := e.createApp("Dup")
	u1, _ := e.users.GetUser(context.Background(), a.BotID)
	u2, _ := e.users.GetUser(context.Background(), b.BotID)
	if u1.Username == u2.Username || !u2.Bot || !strings.HasPrefix(u2.Username, "Dup-") {
		t.Fatalf("bot users %q and %q", u1.Username, u2.Username)
	}
	r := e.expect(e.do("POST", "/api/v10/applications", e.owner, map[string]any{"name": "x"}), 400, 50035)
	if _, ok := r["errors"].(map[string]any)["name"]; !ok {
		t.Fatalf("form error does not name the field: %v", r)
	}
	e.expect(e.do("POST", "/api/v10/applications", e.owner, `{"name": 5}`), 400, 50035)
	e.expect(e.do("POST", "/api/v10/applications", e.owner, `{`), 400, 50035)
	e.expect(e.do("POST", "/api/v10/applications", a.Token, map[string]any{"name": "botmade"}), 403, 20001)
	e.expect(e.do("POST", "/api/v10/applications", "", map[string]any{"name": "anon"}), 401, 40001)
}

func TestPrivilegedIntents(t *testing.T) {
	e := newEnv(t)
	a := e.createApp("Intents")
	ctx := context.Background()
	if got, err := e.h.AllowedIntents(ctx, a.BotID); err != nil || got != 0 {
		t.Fatalf("AllowedIntents of a new app = %b, %v; want none", got, err)
	}
	// The bot cannot grant itself intents.
	e.expect(e.do("PATCH", "/api/v10/applications/@me", a.Token, map[string]any{"flags": bots.FlagGatewayMessageContent}), 403, 50013)
	e.expect(e.do("PATCH", fmt.Sprintf("/api/v10/applications/%d", a.ID), e.owner, map[string]any{"flags": 1}), 400, 50035)
	m := e.expect(e.do("PATCH", fmt.Sprintf("/api/v10/applications/%d", a.ID), e.owner,
		map[string]any{"flags": bots.FlagGatewayMessageContent | bots.FlagGatewayGuildMembers}), 200, 0)
	if int(m["flags"].(float64)) != bots.FlagGatewayMessageContent|bots.FlagGatewayGuildMembers {
		t.Fatalf("flags = %v", m["flags"])
	}
	got, err := e.h.AllowedIntents(ctx, a.BotID)
	if err != nil || got != 1<<15|1<<1 {
		t.Fatalf("AllowedIntents = %b, %v; want MESSAGE_CONTENT|GUILD_MEMBERS", got, err)
	}
	// A user-token development bot keeps every intent.
	if got, _ := e.h.AllowedIntents(ctx, e.memberID); got != bots.PrivilegedIntents {
		t.Fatalf("AllowedIntents of a plain user = %b", got)
	}
}

// TestTokensNeverStored searches every file of the bot store for the bot
// token and an interaction token: neither may be at rest.
func TestTokensNeverStored(t *testing.T) {
	e := newEnv(t)
	a := e.createApp("Secretive")
	e.install(a, 0)
	_, ixToken := e.invoke(a, e.command(a, "ping"))
	secrets := []string{a.Token, ixToken}
	secrets = append(secrets, strings.Split(a.Token, ".")[2], strings.Split(ixToken, ".")[1])
	e.h.Close()
	if err := e.store.Close(); err != nil {
		t.Fatal(err)
	}
	root := e.dir
	found := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		found++
		for _, s := range secrets {
			if strings.Contains(string(b), s) {
				t.Errorf("%s holds a token", p)
			}
		}
		return nil
	})
	if err != nil || found == 0 {
		t.Fatalf("walk %s: %v (%d files)", root, err, found)
	}
}

// TestAuthOutageIs503: an authentication outage must not look like a bad
// token (discord.js drops its token on a 401).
func TestAuthOutageIs503(t *testing.T) {
	e := newEnv(t, func(_ *bots.Config, d *bots.Deps) {
		d.Authenticate = func(*http.Request) (snowflake.ID, bool, error) {
			return 0, false, fmt.Errorf("load generation: %w", bots.ErrUnavailable)
		}
	})
	e.expect(e.do("GET", "/api/v10/oauth2/applications/@me", "whatever", nil), 503, 0)
}
