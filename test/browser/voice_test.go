//go:build integration

package browser

import (
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

// TestVoiceTwoBrowsers joins two Chromium contexts with fake microphones
// (a 440 Hz tone file) to one voice channel of `concord dev`: op 4 on the
// gateway, VOICE_SERVER_UPDATE, the voice gateway and WebRTC to the SFU.
// Each must receive the other's audio: inbound RTP packets rising, on a
// receive slot the server named for the other user.
func TestVoiceTwoBrowsers(t *testing.T) {
	dir := t.TempDir()
	tone := filepath.Join(dir, "tone.wav")
	if out, err := exec.Command("ffmpeg", "-hide_banner", "-loglevel", "error", "-f", "lavfi", "-i",
		"sine=frequency=440:sample_rate=48000:duration=60", "-ac", "1", tone).CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg (hack/test-deps.sh installs it): %v\n%s", err, out)
	}
	voiceAddr := freeAddr(t)
	srv := startDev(t, "--voice-listen="+voiceAddr)
	spki := voiceSPKI(t, srv.dataDir, voiceAddr)

	reg := func(name string) (token, id string) {
		var r struct{ Token string }
		srv.call(t, "POST", "/auth/register", "", map[string]any{"username": name, "password": name + " password"}, &r)
		var me struct{ ID string }
		srv.call(t, "GET", "/users/@me", r.Token, nil, &me)
		return r.Token, me.ID
	}
	alice, aliceID := reg("alice")
	bob, bobID := reg("bob")
	var g struct{ ID string }
	srv.call(t, "POST", "/guilds", alice, map[string]any{"name": "Voice Test"}, &g)
	var vc struct{ ID string }
	srv.call(t, "POST", "/guilds/"+g.ID+"/channels", alice, map[string]any{"name": "Lounge", "type": 2}, &vc)
	var chans []struct{ ID, Name string }
	srv.call(t, "GET", "/guilds/"+g.ID+"/channels", alice, nil, &chans)
	var inv struct{ Code string }
	srv.call(t, "POST", "/channels/"+chans[0].ID+"/invites", alice, map[string]any{}, &inv)
	srv.call(t, "POST", "/invites/"+inv.Code, bob, map[string]any{}, nil)

	b := newBrowser(t,
		chromedp.Flag("use-fake-ui-for-media-stream", true),
		chromedp.Flag("use-fake-device-for-media-stream", true),
		chromedp.Flag("use-file-for-fake-audio-capture", tone),
		chromedp.Flag("allow-loopback-in-peer-connection", true),
		chromedp.Flag("autoplay-policy", "no-user-gesture-required"),
		chromedp.Flag("ignore-certificate-errors-spki-list", spki),
	)
	pa, pb := b.page("alice"), b.page("bob")
	pages := []*page{pa, pb}
	open := func(p *page, token string) {
		p.do(navigate(srv.base + "/"))
		tok, _ := json.Marshal(token)
		eval[bool](p, fmt.Sprintf(`(localStorage.setItem("concord.token", %s), true)`, tok))
		p.do(navigate(srv.base + "/channels/" + g.ID + "/" + vc.ID))
	}
	open(pa, alice)
	open(pb, bob)

	in(t, "JoinAndHearEachOther", pages, func(t *testing.T) {
		defer func() {
			if t.Failed() {
				if res, err := http.Get(srv.base + "/metrics"); err == nil {
					b, _ := io.ReadAll(res.Body)
					res.Body.Close()
					for _, l := range strings.Split(string(b), "\n") {
						if strings.HasPrefix(l, "concord_voice") && !strings.HasSuffix(l, " 0") {
							t.Log(l)
						}
					}
				}
			}
		}()
		for _, p := range pages {
			p.click("button", "Join Voice")
		}
		for _, p := range pages {
			defer func() {
				if t.Failed() {
					t.Logf("[%s] voice: %s", p.name, eval[string](p, `JSON.stringify({phase: concordVoice.phase, endpoint: concordVoice.endpoint, error: concordVoice.error, close: concordVoice.lastClose, pc: concordVoice.pc && concordVoice.pc.connectionState})`))
				}
			}()
			p.waitFor("region", "Voice Connected", 20*time.Second)
			p.waitFor("button", "Disconnect", time.Second)
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
