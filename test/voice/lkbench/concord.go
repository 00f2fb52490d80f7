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
	"os/signal"
	"runtime/pprof"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/pion/ice/v4"
	"github.com/pion/rtp"
	"github.com/pion/webrtc/v4"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/voice"
	"github.com/concord-chat/concord/runtime/domain/voice/devca"
	"github.com/concord-chat/concord/runtime/domain/voice/signaling"
	"github.com/concord-chat/concord/runtime/domain/voice/token"
	"github.com/concord-chat/concord/test/voice/voiceclient"
)

type concordServed struct {
	Endpoint, CA, Key string
}

// serveConcord is the child: the SFU with its WebRTC transport on
// loopback, until stdin closes. With LKBENCH_CPUPROFILE set it profiles
// its CPU from SIGUSR1 to SIGUSR2 (the parent's measured window).
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
	if path := os.Getenv("LKBENCH_CPUPROFILE"); path != "" {
		go profileOnSignal(ctx, path)
	}
	go func() { _ = (&http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 5 * time.Second}).Serve(l) }()
	go func() { _ = srv.Run(ctx) }()
	pem, _ := os.ReadFile(ca.CertPath)
	if err := json.NewEncoder(os.Stdout).Encode(concordServed{Endpoint: l.Addr().String(), CA: string(pem), Key: token.FormatPrivateKey(key)}); err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	pprof.StopCPUProfile()
	return nil
}

// profileOnSignal writes a CPU profile to path between SIGUSR1 and SIGUSR2.
func profileOnSignal(ctx context.Context, path string) {
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGUSR1, syscall.SIGUSR2)
	var f *os.File
	for {
		select {
		case <-ctx.Done():
			return
		case s := <-sig:
			switch {
			case s == syscall.SIGUSR1 && f == nil:
				var err error
				if f, err = os.Create(path); err == nil {
					if err = pprof.StartCPUProfile(f); err != nil {
						f.Close()
						f = nil
					}
				}
				if err != nil {
					fmt.Fprintln(os.Stderr, "cpuprofile:", err)
				}
			case s == syscall.SIGUSR2 && f != nil:
				pprof.StopCPUProfile()
				f.Close()
				f = nil
			}
		}
	}
}

type concordSys struct {
	cmd     *exec.Cmd
	stdin   io.Closer
	s       concordServed
	profile bool
}

func startConcord(ctx context.Context, o options, pair int) (server, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	c := &concordSys{cmd: pinnedCommand(ctx, o.serverCPUs, self, "concord-sfu")}
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	var env []string
	if o.cpuprofile != "" {
		env = append(env, "LKBENCH_CPUPROFILE="+o.cpuprofile+"."+strconv.Itoa(pair))
		c.profile = true
	}
	if err := startChild(c.cmd, &c.s, env...); err != nil {
		return nil, fmt.Errorf("concord sfu: %w", err)
	}
	return c, nil
}

func (c *concordSys) Name() string   { return "Concord" }
func (c *concordSys) PID() int       { return c.cmd.Process.Pid }
func (c *concordSys) Target() target { return target{Kind: "concord", Concord: c.s} }

// Stop closes the child's stdin, so it ends its profile and exits, and
// kills it if it has not within 10 s.
func (c *concordSys) Stop() {
	_ = c.stdin.Close()
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
}
func (c *concordSys) Window(start bool) {
	if !c.profile {
		return
	}
	s := syscall.SIGUSR2
	if start {
		s = syscall.SIGUSR1
	}
	_ = c.cmd.Process.Signal(s)
}

// concordJoiner joins pion clients over Concord's voice gateway.
type concordJoiner struct {
	key ed25519.PrivateKey
	tls *tls.Config
	api *webrtc.API
	s   concordServed
}

func newConcordJoiner(s concordServed) (*concordJoiner, error) {
	key, err := token.ParsePrivateKey(s.Key)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(s.CA))
	// The clients: host candidates on loopback only (one UDP socket per
	// peer connection), no mDNS, and no interceptors — so no RTCP
	// reports, NACK or TWCC from the clients; LiveKit's clients are
	// configured the same way.
	se := webrtc.SettingEngine{}
	se.SetIncludeLoopbackCandidate(true)
	se.SetNetworkTypes([]webrtc.NetworkType{webrtc.NetworkTypeUDP4})
	se.SetInterfaceFilter(func(name string) bool { return name == "lo" })
	se.SetICEMulticastDNSMode(ice.MulticastDNSModeDisabled)
	me := &webrtc.MediaEngine{}
	if err := me.RegisterDefaultCodecs(); err != nil {
		return nil, err
	}
	api := webrtc.NewAPI(webrtc.WithSettingEngine(se), webrtc.WithMediaEngine(me))
	return &concordJoiner{key: key, tls: &tls.Config{RootCAs: pool}, api: api, s: s}, nil
}

type concordPeer struct {
	gw  *voiceclient.Client
	pc  *webrtc.PeerConnection
	mic *webrtc.TrackLocalStaticRTP
}

func (p *concordPeer) Send(pkt *rtp.Packet) error { return p.mic.WriteRTP(pkt) }
func (p *concordPeer) Close()                     { _ = p.pc.Close(); p.gw.Close() }

// Join connects a pion client over Concord's voice gateway ("webrtc"
// select protocol): a microphone line (sendrecv, so also one receive slot)
// and one more receive-only audio line per further track it expects. The
// room is the voice channel.
func (c *concordJoiner) Join(ctx context.Context, pt part, rx *receiver) (peer, error) {
	uid := uint64(5000 + pt.ID)
	sess := "bench-" + strconv.Itoa(pt.ID)
	tok, err := token.Sign(c.key, token.Claims{UserID: snowflake.ID(uid), GuildID: 1, ChannelID: snowflake.ID(100 + pt.Room), Server: "bench", SessionID: sess}, time.Now())
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
	for range pt.Expect - 1 {
		if _, err := pc.AddTransceiverFromKind(webrtc.RTPCodecTypeAudio, webrtc.RTPTransceiverInit{Direction: webrtc.RTPTransceiverDirectionRecvonly}); err != nil {
			p.Close()
			return nil, err
		}
	}
	pc.OnTrack(func(tr *webrtc.TrackRemote, _ *webrtc.RTPReceiver) { rx.read(tr) })
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
	}
	if pt.Speaker {
		gw.SendOp(signaling.OpSpeaking, map[string]any{"speaking": 1, "delay": 0, "ssrc": gw.Ready.SSRC})
	}
	return p, nil
}
