//go:build integration

package voice

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/concord-chat/concord/internal/voicebot"
	"github.com/concord-chat/concord/runtime/app"
	"github.com/concord-chat/concord/runtime/config"
	"github.com/concord-chat/concord/runtime/domain/voice/devca"
)

// concord is `concord dev` in the test process: the platform with every
// role of the role table, the voice role's SFU among them, on loopback.
type concord struct {
	t      *testing.T
	p      *app.Node
	addr   string // host:port of REST and the chat gateway
	caPath string // the dev CA the voice gateway's certificate is from
}

func startConcord(t *testing.T) *concord {
	t.Helper()
	cfg := config.Default()
	cfg.Roles = app.DefaultTables().Names()
	cfg.DataDir = t.TempDir()
	cfg.DevUser = false
	cfg.Logger = testLogger(t)
	ctx, cancel := context.WithCancel(context.Background())
	cfg.HTTP = "127.0.0.1:0"
	p, err := app.Open(ctx, cfg, app.Options{})
	if err != nil {
		cancel()
		t.Fatalf("start concord dev: %v", err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		p.Close()
	})
	ca := filepath.Join(cfg.DataDir, devca.CertFile)
	if _, err := os.Stat(ca); err != nil {
		t.Fatalf("concord dev wrote no voice CA at %s: %v", ca, err)
	}
	return &concord{t: t, p: p, addr: p.HTTPAddr(), caPath: ca}
}

// do is one REST call; it fails the test on a status >= 300.
func (c *concord) do(token, method, path string, body, out any) {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, "http://"+c.addr+"/api/v10"+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		c.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			c.t.Fatalf("%s %s: %v in %s", method, path, err, raw)
		}
	}
}

// account registers a user and returns its token and id.
func (c *concord) account(name string) (string, string) {
	var out struct {
		Token  string `json:"token"`
		UserID string `json:"user_id"`
	}
	c.do("", "POST", "/auth/register", map[string]string{"username": name, "password": "correct horse " + name}, &out)
	return out.Token, out.UserID
}

// metric returns the value of the first /metrics line starting with
// prefix.
func (c *concord) metric(prefix string) string {
	c.t.Helper()
	resp, err := http.Get("http://" + c.addr + "/metrics")
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, prefix) {
			return strings.TrimSpace(strings.TrimPrefix(line, prefix))
		}
	}
	return ""
}

// TestBotsThroughConcordGateway: unmodified discord.js 14 with
// @discordjs/voice 0.19 and discord.py 2.7.1 log in to `concord dev`, join
// the same voice channel with op 4 over Concord's own chat gateway, get
// VOICE_STATE_UPDATE and VOICE_SERVER_UPDATE from the guild (token signed
// with the fleet's key, endpoint of the in-process SFU, TLS from the dev
// CA at <data-dir>/voice-ca.pem), play the tone to each other and receive
// at least 95 % of the other's packets byte-identical.
func TestBotsThroughConcordGateway(t *testing.T) {
	dir, node := voicebot.JSNode(t)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "discord.js")); err != nil {
		t.Fatalf("discord.js is missing from %s (run `make test`, which runs npm ci there): %v", dir, err)
	}
	py := os.Getenv("CONCORD_VOICE_PY")
	if py == "" {
		t.Fatal("CONCORD_VOICE_PY is not set: run `make test`, whose hack/test-deps.sh installs discord.py[voice] and discord-ext-voice-recv into a venv")
	}
	path, pkts := tone(t)
	c := startConcord(t)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()

	jsTok, _ := c.account("voice-js")
	pyTok, pyID := c.account("voice-py")
	var g struct {
		ID string `json:"id"`
	}
	c.do(jsTok, "POST", "/guilds", map[string]string{"name": "voice"}, &g)
	var ch struct {
		ID        string  `json:"id"`
		Type      int     `json:"type"`
		RTCRegion *string `json:"rtc_region"`
	}
	c.do(jsTok, "POST", "/guilds/"+g.ID+"/channels", map[string]any{"name": "Lounge", "type": 2}, &ch)
	var inv struct {
		Code string `json:"code"`
	}
	c.do(jsTok, "POST", "/channels/"+ch.ID+"/invites", map[string]any{}, &inv)
	c.do(pyTok, "POST", "/invites/"+inv.Code, map[string]any{}, nil)
	var regions []struct {
		ID      string `json:"id"`
		Optimal bool   `json:"optimal"`
	}
	c.do(pyTok, "GET", "/voice/regions", nil, &regions)
	if len(regions) != 1 || regions[0].ID != "local" || !regions[0].Optimal {
		t.Fatalf("GET /voice/regions = %+v, want the in-process SFU's region", regions)
	}

	tmp := t.TempDir()
	jsOut, pyOut := filepath.Join(tmp, "js.json"), filepath.Join(tmp, "py.json")
	jsCmd := exec.CommandContext(ctx, node, filepath.Join(dir, "voicebot.js"))
	jsCmd.Dir = dir
	jsCmd.Env = append(os.Environ(), "NODE_EXTRA_CA_CERTS="+c.caPath, "CHAT_API=http://"+c.addr+"/api", "BOT_TOKEN="+jsTok,
		"GUILD_ID="+g.ID, "CHANNEL_ID="+ch.ID, "TONE="+path, "LISTEN_TO="+pyID, "WAIT_STDIN=1", "DURATION_MS=4000", "OUT="+jsOut)
	wd, _ := os.Getwd()
	pyCmd := exec.CommandContext(ctx, py, filepath.Join(wd, "py", "voicebot.py"))
	pyCmd.Env = append(os.Environ(), "SSL_CERT_FILE="+c.caPath, "CHAT_HOST="+c.addr, "BOT_TOKEN="+pyTok,
		"CHANNEL_ID="+ch.ID, "TONE="+path, "WAIT_STDIN=1", "DURATION=4", "OUT="+pyOut)
	js := voicebot.Start(t, "discord.js", jsCmd, jsOut)
	pyb := voicebot.Start(t, "discord.py", pyCmd, pyOut)
	js.WaitJoined(t, ctx)
	pyb.WaitJoined(t, ctx)
	if got := c.metric(`concord_guild_voice_joins_total{result="joined"} `); got != "2" {
		t.Fatalf("Concord's guild counted %q op 4 joins, want 2: the libraries did not join through Concord's gateway", got)
	}
	js.Go()
	pyb.Go()
	var jr voicebot.Result
	var pr pyResult
	for _, b := range []*voicebot.Bot{js, pyb} {
		err := b.Wait()
		raw, rerr := os.ReadFile(b.Out)
		if rerr != nil {
			t.Fatalf("%s wrote no result (%v, exit %v)\nlogs: %s", b.Name, rerr, err, b.Logs)
		}
		var target any = &jr
		if b == pyb {
			target = &pr
		}
		if err := json.Unmarshal(raw, target); err != nil {
			t.Fatalf("%s result: %v", b.Name, err)
		}
		if err != nil {
			t.Fatalf("%s exited with %v\nresult: %s\nlogs: %s", b.Name, err, raw, b.Logs)
		}
	}
	if jr.Error != "" || !jr.Ready || !jr.Played {
		t.Fatalf("discord.js: ready=%v played=%v %s\nstates=%v", jr.Ready, jr.Played, jr.Error, jr.States)
	}
	if pr.Error != "" || !pr.Ready || !pr.Played {
		t.Fatalf("discord.py: ready=%v played=%v %s", pr.Ready, pr.Played, pr.Error)
	}
	requireRatio(t, "discord.js from discord.py", matchInOrder(t, "discord.js", pkts, jr.Packets()), len(pkts))
	requireRatio(t, "discord.py from discord.js", matchInOrder(t, "discord.py", pkts, pr.packets()), len(pkts))
}
