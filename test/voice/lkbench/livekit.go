//go:build livekit

package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/pion/interceptor"
	"github.com/pion/rtp"
	"github.com/pion/webrtc/v4"

	protoLogger "github.com/livekit/protocol/logger"
	lksdk "github.com/livekit/server-sdk-go/v2"
)

const (
	lkKey    = "benchkey"
	lkSecret = "bench-secret-of-at-least-32-characters"
)

type lkSys struct {
	cmd *exec.Cmd
	url string
	dir string
}

func freePort(network string) (int, error) {
	if network == "udp" {
		c, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		defer c.Close()
		return c.LocalAddr().(*net.UDPAddr).Port, nil
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startLiveKit runs livekit-server on loopback: one signalling port, one
// UDP media port, no TURN, no Redis (a single node), errors only.
func startLiveKit(ctx context.Context, o options) (server, error) {
	bin := o.lk
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("livekit-server binary: %w (CGO_ENABLED=0 GOBIN=~/.cache/concord/livekit/bin go install github.com/livekit/livekit-server/cmd/server@v1.13.5)", err)
	}
	port, err := freePort("tcp")
	if err != nil {
		return nil, err
	}
	udp, err := freePort("udp")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "lkbench-livekit")
	if err != nil {
		return nil, err
	}
	conf := fmt.Sprintf(`port: %d
bind_addresses: ["127.0.0.1"]
rtc:
  udp_port: %d
  tcp_port: 0
  use_external_ip: false
  node_ip: 127.0.0.1
  enable_loopback_candidate: true
keys:
  %s: %s
logging:
  level: error
room:
  auto_create: true
  max_participants: 0
`, port, udp, lkKey, lkSecret)
	path := filepath.Join(dir, "livekit.yaml")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		return nil, err
	}
	s := &lkSys{cmd: pinnedCommand(ctx, o.serverCPUs, bin, "--config", path), url: "ws://127.0.0.1:" + strconv.Itoa(port), dir: dir}
	if err := startChild(s.cmd, nil); err != nil {
		return nil, fmt.Errorf("livekit-server: %w", err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err == nil {
			c.Close()
			return s, nil
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("livekit-server did not listen on %d", port)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *lkSys) Name() string      { return "LiveKit" }
func (s *lkSys) PID() int          { return s.cmd.Process.Pid }
func (s *lkSys) Target() target    { return target{Kind: "livekit", LiveKitURL: s.url} }
func (s *lkSys) Window(start bool) {}
func (s *lkSys) Stop()             { _ = s.cmd.Process.Kill(); _ = s.cmd.Wait(); os.RemoveAll(s.dir) }

type lkJoiner struct{ url string }

// newLKJoiner silences the SDK's logging (connection state changes per
// participant) for the driver process.
func newLKJoiner(url string) lkJoiner {
	lksdk.SetLogger(protoLogger.GetDiscardLogger())
	return lkJoiner{url: url}
}

type lkPeer struct {
	room  *lksdk.Room
	track *webrtc.TrackLocalStaticRTP
}

func (p *lkPeer) Send(pkt *rtp.Packet) error { return p.track.WriteRTP(pkt) }
func (p *lkPeer) Close()                     { p.room.Disconnect() }

// Join connects a participant with LiveKit's Go SDK (pion underneath) to
// the room: a speaker publishes an Opus track; everyone is subscribed to
// the room's other published tracks (auto-subscribe) and counts their RTP
// packets. Like Concord's clients, no interceptors: no RTCP reports, NACK
// or TWCC from the clients.
func (j lkJoiner) Join(ctx context.Context, pt part, rx *receiver) (peer, error) {
	cb := lksdk.NewRoomCallback()
	cb.ParticipantCallback.OnTrackSubscribed = func(tr *webrtc.TrackRemote, _ *lksdk.RemoteTrackPublication, _ *lksdk.RemoteParticipant) {
		go rx.read(tr)
	}
	room, err := lksdk.ConnectToRoom(j.url, lksdk.ConnectInfo{APIKey: lkKey, APISecret: lkSecret, RoomName: "bench-" + strconv.Itoa(pt.Room),
		ParticipantIdentity: "p" + strconv.Itoa(pt.ID)}, cb, lksdk.WithInterceptors([]interceptor.Factory{}), lksdk.WithDisableRegionDiscovery(), lksdk.WithConnectTimeout(60*time.Second))
	if err != nil {
		return nil, err
	}
	p := &lkPeer{room: room}
	if pt.Speaker {
		p.track, err = webrtc.NewTrackLocalStaticRTP(webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeOpus, ClockRate: 48000, Channels: 2}, "mic", "bench")
		if err != nil {
			room.Disconnect()
			return nil, err
		}
		if _, err := room.LocalParticipant.PublishTrack(p.track, &lksdk.TrackPublicationOptions{Name: "mic"}); err != nil {
			room.Disconnect()
			return nil, err
		}
	}
	return p, nil
}
