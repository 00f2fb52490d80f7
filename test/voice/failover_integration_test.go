//go:build integration

package voice

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/concord-chat/concord/internal/voicebot"
	etcdreg "github.com/concord-chat/concord/runtime/adapters/registry/etcd"
	"github.com/concord-chat/concord/runtime/app"
	"github.com/concord-chat/concord/runtime/config"
	"github.com/concord-chat/concord/runtime/domain/voice"
	"github.com/concord-chat/concord/runtime/domain/voice/devca"
	"github.com/concord-chat/concord/runtime/domain/voice/fleet"
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
	name  string
	admin string // host:port of its admin listener (/admin/, as VoiceRegion pods run it)
	cmd   *exec.Cmd
	logs  *strings.Builder
}

func startVoiceNode(t *testing.T, bin, name, etcd, dataDir string) *voiceNode {
	t.Helper()
	return startVoiceNodeWith(t, bin, name, etcd, dataDir, nil)
}

// startVoiceNodeWith starts a voice node with env added to its
// environment and extra flags.
func startVoiceNodeWith(t *testing.T, bin, name, etcd, dataDir string, env []string, extra ...string) *voiceNode {
	t.Helper()
	// A port the node can bind for its admin listener: the test must
	// know it to reach /admin/.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	args := []string{"serve", "--roles=voice", "--node=" + name, "--registry=etcd://" + etcd, "--server-key=" + failoverServerKey,
		"--data-dir=" + dataDir, "--http=127.0.0.1:0", "--admin=" + addr, "--voice-tls=devca", "--log-level=debug"}
	cmd := exec.Command(bin, append(args, extra...)...)
	cmd.Env = append(os.Environ(), env...)
	logs := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	n := &voiceNode{name: name, admin: addr, cmd: cmd, logs: logs}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return n
}

// twoSFUCall is a guild node in the test process and two SFUs, each
// `concord serve --roles=voice` in its own process, on one etcd, with two
// discord.js bots in one call: a speaker playing a tone and a listener
// recording each packet's arrival.
type twoSFUCall struct {
	ctx      context.Context
	reg      *etcdreg.Registry
	sfus     map[string]*voiceNode
	speaker  *voicebot.Bot
	listener *voicebot.Bot
	out      string // the listener's result file
	// chat is the guild node's REST API; owner is the speaker's token
	// (it created the guild), guild and speakerID name the call's guild
	// and speaker.
	chat      *concord
	owner     string
	guild     string
	speakerID string
}

// startTwoSFUCall starts the nodes and the bots; the speaker plays a
// toneSeconds tone and the listener listens for listenMS.
func startTwoSFUCall(t *testing.T, toneSeconds, listenMS int) *twoSFUCall {
	t.Helper()
	dir, node := voicebot.JSNode(t)
	path, _ := toneOf(t, toneSeconds)
	bin := buildConcord(t)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	t.Cleanup(cancel)
	stopEtcd, ep, err := etcdreg.StartEmbedded(ctx, t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stopEtcd)
	etcdAddr := strings.TrimPrefix(ep, "http://")

	// The guild node, in the test process.
	logger := testLogger(t)
	nctx, ncancel := context.WithCancel(context.Background())
	g, err := app.Open(nctx, config.Config{Roles: app.DefaultRoles, Node: "guild-1", DataDir: t.TempDir(), HTTP: "127.0.0.1:0",
		Registry: "etcd://" + etcdAddr, ServerKey: failoverServerKey, LeaseTTL: 2 * time.Second, Logger: logger}, app.Options{})
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
	js := func(name, token, out string, env ...string) *voicebot.Bot {
		cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "voicebot.js"))
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "NODE_EXTRA_CA_CERTS="+c.caPath, "CHAT_API=http://"+c.addr+"/api", "BOT_TOKEN="+token,
			"GUILD_ID="+gd.ID, "CHANNEL_ID="+ch.ID, "WAIT_STDIN=1", "OUT="+out)
		cmd.Env = append(cmd.Env, env...)
		return voicebot.Start(t, name, cmd, out)
	}
	call := &twoSFUCall{ctx: ctx, reg: reg, sfus: map[string]*voiceNode{"sfu-a": v1, "sfu-b": v2}, out: filepath.Join(tmp, "listener.json"),
		chat: c, owner: aTok, guild: gd.ID, speakerID: aID}
	call.speaker = js("speaker", aTok, filepath.Join(tmp, "speaker.json"), "TONE="+path, "DURATION_MS=500")
	call.listener = js("listener", bTok, call.out, "LISTEN_TO="+aID, "DURATION_MS="+strconv.Itoa(listenMS))
	call.speaker.WaitJoined(t, ctx)
	call.listener.WaitJoined(t, ctx)
	call.speaker.Go()
	call.listener.Go()
	return call
}

// loads reads the SFUs' load reports from the registry.
func (c *twoSFUCall) loads(t *testing.T) map[string]voice.Load {
	t.Helper()
	kv, err := c.reg.List(c.ctx, fleet.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]voice.Load{}
	for k, v := range kv {
		var l voice.Load
		if err := json.Unmarshal(v, &l); err == nil {
			out[strings.TrimPrefix(k, fleet.Prefix)] = l
		}
	}
	return out
}

// host waits for the SFU whose load report shows the call's two
// participants.
func (c *twoSFUCall) host(t *testing.T, except string) *voiceNode {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for id, l := range c.loads(t) {
			if id != except && l.Participants == 2 {
				return c.sfus[id]
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no SFU other than %q reported the call's two participants: %+v", except, c.loads(t))
		}
		time.Sleep(200 * time.Millisecond) // load reports are polled: nothing to await
	}
}

// heard is the listener's result split at an event: packets before and
// after it, and the silence the event opened: from the last packet heard
// by the event (or 50 ms after it: packets already on their way may still
// arrive) to the next one (audio back). Later gaps — a loaded machine's
// hiccup seconds after the failover — are not the event's.
func (c *twoSFUCall) heard(t *testing.T, at time.Time) (r voicebot.Result, before, after int, silentFrom, back time.Time) {
	t.Helper()
	r = c.listener.Result(t)
	inFlight := at.Add(50 * time.Millisecond)
	for _, ms := range r.Times {
		tm := time.UnixMilli(ms)
		if tm.Before(at) {
			before++
		} else {
			after++
		}
		switch {
		case !tm.After(inFlight):
			silentFrom = tm
		case back.IsZero():
			back = tm
		}
	}
	return r, before, after, silentFrom, back
}

// TestFailoverKillSFU: the SFU hosting a call of two discord.js bots is
// killed with SIGKILL: its load reports stop (and a rejoin makes the
// guild probe it), the guild's fleet drops it, the call is placed on the
// other SFU and both bots get a new VOICE_SERVER_UPDATE, reconnect, and
// the listener hears the tone again. The time from the kill to the first
// packet heard afterwards is logged (docs/benchmarks.md).
func TestFailoverKillSFU(t *testing.T) {
	c := startTwoSFUCall(t, 20, 24000)
	host := c.host(t, "")
	time.Sleep(2 * time.Second) // let audio flow on the first SFU before the kill
	killed := time.Now()
	if err := host.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed %s (the call's SFU) with SIGKILL", host.name)
	r, before, after, silentFrom, back := c.heard(t, killed)
	t.Logf("listener heard %d packets before the kill and %d after; silent from %v to %v after the kill: audio back %v after the kill",
		before, after, silentFrom.Sub(killed), back.Sub(killed), back.Sub(killed))
	if before < 50 {
		t.Fatalf("only %d packets before the kill: the call never carried audio (states %v)", before, r.States)
	}
	if after < 100 {
		t.Fatalf("only %d packets after the kill: the call did not fail over (states %v, error %s)\nlistener logs: %s", after, r.States, r.Error, c.listener.Logs)
	}
	if gap := back.Sub(killed); gap > 15*time.Second {
		t.Fatalf("audio back %v after the kill, want under 15 s", gap)
	}
}
