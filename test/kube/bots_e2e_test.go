//go:build e2e

package kube

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/concord-chat/concord/internal/resttest"
)

// botEvent is one JSON line of the conformance bots (test/conformance/py).
type botEvent struct {
	Ev      string `json:"ev"`
	User    string `json:"user"`
	Content string `json:"content"`
	Message string `json:"message"`
	ID      string `json:"id"`
	// discord.js bots (test/conformance/js) add these.
	Reference   string `json:"reference"`
	Application string `json:"application"`
	Command     string `json:"command"`
	Ping        string `json:"ping"`
	Slow        string `json:"slow"`
	Guilds      []struct {
		ID       string   `json:"id"`
		Channels []string `json:"channels"`
	} `json:"guilds"`
}

// app is a bot application installed in a guild.
type app struct{ id, token string }

// newBot creates an application as owner with MESSAGE_CONTENT enabled and
// installs its bot in the guild.
func newBot(t *testing.T, w world, name string) app {
	t.Helper()
	var out struct {
		ID string `json:"id"`
	}
	resttest.Call(t, router, w.owner, "POST", "/applications", map[string]any{"name": name}, &out)
	var reset struct {
		Token string `json:"token"`
	}
	resttest.Call(t, router, w.owner, "POST", "/applications/"+out.ID+"/bot/reset", nil, &reset)
	const messageContent = 1 << 18 // GATEWAY_MESSAGE_CONTENT (the portal switch on Discord)
	resttest.Call(t, router, w.owner, "PATCH", "/applications/"+out.ID, map[string]any{"flags": messageContent}, &map[string]any{})
	perms := strconv.Itoa(1<<10 | 1<<11 | 1<<16) // view, send, read history
	var inst struct {
		RoleID string `json:"role_id"`
	}
	resttest.Call(t, router, w.owner, "POST", "/oauth2/authorize?client_id="+out.ID+"&scope=bot&permissions="+perms,
		map[string]any{"guild_id": w.guild, "permissions": perms, "authorize": true}, &inst)
	if out.ID == "" || reset.Token == "" || inst.RoleID == "" {
		t.Fatalf("application %q token %q role %q", out.ID, reset.Token, inst.RoleID)
	}
	return app{id: out.ID, token: reset.Token}
}

// TestDiscordPyBot runs the unmodified discord.py bot of the conformance
// suite against the platform on the node: REST through the api Service,
// its gateway session through the GatewayPool's Service. It logs in
// (READY as its bot user), and answers "ping" with a reply it then edits
// and deletes.
func TestDiscordPyBot(t *testing.T) {
	py := os.Getenv("CONCORD_PY")
	if py == "" {
		t.Fatal("CONCORD_PY is unset: source ~/.cache/concord/test-env.sh (make test-deps installs discord.py)")
	}
	w := newWorld(t, "dpy")
	a := newBot(t, w, "dpy")
	dir, err := filepath.Abs(filepath.Join("..", "conformance", "py"))
	if err != nil {
		t.Fatal(err)
	}
	events := startBot(t, dir, []string{py, "bot.py"}, []string{"CONCORD_HOST=" + router, "CONCORD_TOKEN=" + a.token})
	ready := await(t, events, "ready", func(e botEvent) bool { return e.Ev == "ready" })
	if ready.User != a.id {
		t.Fatalf("READY as %s, want the bot user %s", ready.User, a.id)
	}
	post(t, w.owner, w.channel, "ping")
	await(t, events, "the reply", func(e botEvent) bool { return e.Ev == "replied" })
	await(t, events, "the edit", func(e botEvent) bool { return e.Ev == "edited" && e.Content == "pong (edited)" })
	await(t, events, "the delete", func(e botEvent) bool { return e.Ev == "deleted" })
}

// startBot runs a conformance bot and streams its JSON-line events; an
// "error" event fails the test. Closing its stdin (at cleanup) stops it.
func startBot(t *testing.T, dir string, argv, env []string) <-chan botEvent {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logs := &lineLog{t: t}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %v: %v", argv, err)
	}
	out := make(chan botEvent, 256)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var e botEvent
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				out <- e
			}
		}
		close(out)
	}()
	t.Cleanup(func() {
		_ = stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
		}
	})
	return out
}

// await reads events until match, failing on an "error" event, the bot's
// exit or the deadline.
func await(t *testing.T, ch <-chan botEvent, what string, match func(botEvent) bool) botEvent {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case e, ok := <-ch:
			if !ok {
				t.Fatalf("the bot exited before %s", what)
			}
			if e.Ev == "error" {
				t.Fatalf("bot error before %s: %s", what, e.Message)
			}
			if match(e) {
				return e
			}
		case <-deadline:
			t.Fatalf("no %s from the bot", what)
		}
	}
}

// lineLog sends a process's stderr to the test log.
type lineLog struct{ t *testing.T }

func (l *lineLog) Write(p []byte) (int, error) {
	l.t.Logf("bot: %s", p)
	return len(p), nil
}

var _ io.Writer = (*lineLog)(nil)
