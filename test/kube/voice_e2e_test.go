//go:build e2e

package kube

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
	"github.com/concord-chat/concord/internal/resttest"
	"github.com/concord-chat/concord/internal/voicebot"
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

// startVoiceBot runs test/voice/js/voicebot.js with CHAT_API set: an
// unmodified discord.js client logs in through the router (the api and
// GatewayPool Services) and @discordjs/voice joins through discord.js's
// own adapter, so op 4 and the voice dispatches are Concord's.
func startVoiceBot(t *testing.T, ctx context.Context, name, caPath string, env ...string) *voicebot.Bot {
	t.Helper()
	dir, node := voicebot.JSNode(t)
	script, err := filepath.Abs(filepath.Join("..", "voice", "js", "voicebot.js"))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), name+".json")
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"), "NODE_EXTRA_CA_CERTS="+caPath,
		"CHAT_API=http://"+router+"/api", "WAIT_STDIN=1", "OUT="+out)
	cmd.Env = append(cmd.Env, env...)
	return voicebot.Start(t, name, cmd, out)
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
	speaker := startVoiceBot(t, ctx, "speaker", caPath, append(common, "BOT_TOKEN="+w.owner, "TONE="+voicebot.Tone(t, 40), "DURATION_MS=500")...)
	listener := startVoiceBot(t, ctx, "listener", caPath, append(common, "BOT_TOKEN="+w.member, "LISTEN_TO="+w.ownerID, "DURATION_MS=44000")...)
	speaker.WaitJoined(t, ctx)
	listener.WaitJoined(t, ctx)
	speaker.Go()
	listener.Go()
	host := callServer(t, ctx, "")
	deleted := time.Now()
	if err := kcs.CoreV1().Pods(ns).Delete(ctx, host, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete SFU pod %s: %v", host, err)
	}
	t.Logf("deleted %s, the call's SFU pod", host)
	next := callServer(t, ctx, host)

	r := listener.Result(t)
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
		t.Fatalf("%d packets after the deletion: the call did not move (states %v)\nlogs: %s", after, r.States, listener.Logs)
	}
	if gap := back.Sub(deleted); gap > failoverBound {
		t.Fatalf("audio back %v after the SFU pod's deletion, over the %v bound", gap, failoverBound)
	}
	if sr := speaker.Result(t); !sr.Played {
		t.Fatalf("the speaker did not play its tone to the end (states %v, error %s)", sr.States, sr.Error)
	}
}
