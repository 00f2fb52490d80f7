//go:build livekit

package main

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pion/rtp"
	"github.com/pion/webrtc/v4"

	"github.com/concord-chat/concord/runtime/snowflake"
	"github.com/concord-chat/concord/runtime/voice"
	"github.com/concord-chat/concord/runtime/voice/devca"
	"github.com/concord-chat/concord/runtime/voice/signaling"
	"github.com/concord-chat/concord/runtime/voice/token"
	"github.com/concord-chat/concord/test/voice/voiceclient"
)

type concordServed struct {
	Endpoint, CA, Key string
}

// serveConcord is the child: the SFU with its WebRTC transport on
// loopback, until stdin closes.
func serveConcord() error {
	key, err := token.GenerateKey()
	if err != nil {
		return err
	}
	srv, err := voice.New(voice.Config{ID: "bench", UDPAddr: "127.0.0.1:0", TrustedKeys: []ed25519.PublicKey{key.Public().(ed25519.PublicKey)},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), MaxParticipants: 1000,
		WebRTC: &voice.WebRTCConfig{UDPAddr: "127.0.0.1:0"}})
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "lkbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ca, err := devca.Ensure(dir)
	if err != nil {
		return err
	}
	cfg, err := ca.ServerConfig()
	if err != nil {
		return err
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = (&http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 5 * time.Second}).Serve(l) }()
	go func() { _ = srv.Run(ctx) }()
	pem, _ := os.ReadFile(ca.CertPath)
	if err := json.NewEncoder(os.Stdout).Encode(concordServed{Endpoint: l.Addr().String(), CA: string(pem), Key: token.FormatPrivateKey(key)}); err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

type concordSys struct {
	cmd   *exec.Cmd
	stdin io.Closer
	s     concordServed
	key   ed25519.PrivateKey
	tls   *tls.Config
	api   *webrtc.API
}

func startConcord(ctx context.Context) (system, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	c := &concordSys{cmd: exec.CommandContext(ctx, self, "concord-sfu")}
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := child(ctx, c.cmd, &c.s); err != nil {
		return nil, fmt.Errorf("concord sfu: %w", err)
	}
	if c.key, err = token.ParsePrivateKey(c.s.Key); err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(c.s.CA))
	c.tls = &tls.Config{RootCAs: pool}
	if c.api, err = pionAPI(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *concordSys) Name() string { return "Concord (runtime/voice, WebRTC)" }
func (c *concordSys) PID() int     { return c.cmd.Process.Pid }
func (c *concordSys) Stop()        { _ = c.stdin.Close(); _ = c.cmd.Process.Kill(); _ = c.cmd.Wait() }

type concordPeer struct {
	gw  *voiceclient.Client
	pc  *webrtc.PeerConnection
	mic *webrtc.TrackLocalStaticRTP
}

func (p *concordPeer) Send(pkt *rtp.Packet) error { return p.mic.WriteRTP(pkt) }
func (p *concordPeer) Close()                     { _ = p.pc.Close(); p.gw.Close() }

// Join connects a pion client over Concord's voice gateway ("webrtc"
// select protocol): a microphone line and, for a listener, one receive
// slot.
func (c *concordSys) Join(ctx context.Context, i int, speaker bool, got *atomic.Int64) (peer, error) {
	uid := uint64(5000 + i)
	sess := "bench-" + strconv.Itoa(i)
	tok, err := token.Sign(c.key, token.Claims{UserID: snowflake.ID(uid), GuildID: 1, ChannelID: 2, Server: "bench", SessionID: sess}, time.Now())
	if err != nil {
		return nil, err
	}
	gw, err := voiceclient.Open(ctx, voiceclient.Options{Endpoint: c.s.Endpoint, GuildID: 1, UserID: uid, SessionID: sess, Token: tok, TLS: c.tls})
	if err != nil {
		return nil, err
	}
	if err := gw.Identify(ctx); err != nil {
		gw.Close()
		return nil, err
	}
	pc, err := c.api.NewPeerConnection(webrtc.Configuration{})
	if err != nil {
		gw.Close()
		return nil, err
	}
	p := &concordPeer{gw: gw, pc: pc}
	p.mic, _ = webrtc.NewTrackLocalStaticRTP(webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeOpus, ClockRate: 48000, Channels: 2}, "mic", "bench")
	if _, err := pc.AddTrack(p.mic); err != nil {
		p.Close()
		return nil, err
	}
	if !speaker {
		if _, err := pc.AddTransceiverFromKind(webrtc.RTPCodecTypeAudio, webrtc.RTPTransceiverInit{Direction: webrtc.RTPTransceiverDirectionRecvonly}); err != nil {
			p.Close()
			return nil, err
		}
		pc.OnTrack(func(tr *webrtc.TrackRemote, _ *webrtc.RTPReceiver) {
			for {
				if _, _, err := tr.ReadRTP(); err != nil {
					return
				}
				got.Add(1)
			}
		})
	}
	connected := make(chan struct{})
	var once sync.Once
	pc.OnConnectionStateChange(func(st webrtc.PeerConnectionState) {
		if st == webrtc.PeerConnectionStateConnected {
			once.Do(func() { close(connected) })
		}
	})
	offer, err := pc.CreateOffer(nil)
	if err != nil {
		p.Close()
		return nil, err
	}
	gathered := webrtc.GatheringCompletePromise(pc)
	if err := pc.SetLocalDescription(offer); err != nil {
		p.Close()
		return nil, err
	}
	<-gathered
	sdp := pc.LocalDescription().SDP
	gw.SendOp(signaling.OpSelectProtocol, map[string]any{"protocol": "webrtc", "data": sdp, "sdp": sdp,
		"codecs": []map[string]any{{"name": "opus", "type": "audio", "priority": 1000, "payload_type": 111}}})
	f, err := gw.Next(ctx, signaling.OpSessionDescription)
	if err != nil {
		p.Close()
		return nil, err
	}
	var sd signaling.SessionDescriptionWebRTC
	if err := json.Unmarshal(f.D, &sd); err != nil || sd.SDP == "" {
		p.Close()
		return nil, fmt.Errorf("no answer in %s", f.D)
	}
	if err := pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeAnswer, SDP: sd.SDP}); err != nil {
		p.Close()
		return nil, err
	}
	select {
	case <-connected:
	case <-ctx.Done():
		p.Close()
		return nil, ctx.Err()
	case <-time.After(30 * time.Second):
		p.Close()
		return nil, fmt.Errorf("peer connection never connected")
	}
	if speaker {
		gw.SendOp(signaling.OpSpeaking, map[string]any{"speaking": 1, "delay": 0, "ssrc": gw.Ready.SSRC})
	}
	return p, nil
}
