// Package voicerole is the voice role: one SFU (runtime/domain/voice) built
// through package wiring. It joins the process's in-process fleet when the
// process gives one (wiring.VoiceFleet: `concord dev`, its voice gateway
// serving TLS from the dev CA at <data-dir>/voice-ca.pem, the process's
// default) and reports its load where the process gives a load port
// (wiring.VoiceLoad: the registry, every 2 s, its gateway behind the
// platform's TLS). It admits the tokens signed with wiring.VoiceKeys.
package voicerole

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/concord-chat/concord/runtime/base/lifecycle"
	"github.com/concord-chat/concord/runtime/config"
	"github.com/concord-chat/concord/runtime/domain/voice"
	"github.com/concord-chat/concord/runtime/domain/voice/devca"
	"github.com/concord-chat/concord/runtime/edge/httpserve"
	"github.com/concord-chat/concord/runtime/services/wiring"
)

// Name is the role's --roles name.
const Name = "voice"

// Role is the voice role.
var Role = wiring.Role{Name: Name, Build: build,
	Needs: []string{wiring.VoiceKeys.Name},
	Uses:  []string{wiring.VoiceFleet.Name, wiring.VoiceLoad.Name},
}

// settings fills v's defaults for a process; the process decides
// Voice.TLS's default (devca where every role is in it).
func settings(c config.Config) (config.Voice, error) {
	v := c.Voice
	if v.Listen == "" {
		v.Listen = "127.0.0.1:0"
	}
	host, _, err := net.SplitHostPort(v.Listen)
	if err != nil {
		return v, fmt.Errorf("voice: --voice-listen %q: %w", v.Listen, err)
	}
	if v.UDP == "" {
		v.UDP = net.JoinHostPort(host, "0")
	}
	if v.WebRTCUDP == "" {
		v.WebRTCUDP = net.JoinHostPort(host, "0")
	}
	if v.PublicHost == "" {
		v.PublicHost = host
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
			v.PublicHost = "127.0.0.1"
		}
	}
	if v.PublicIP == "" {
		if ip := net.ParseIP(v.PublicHost); ip != nil && ip.To4() != nil {
			v.PublicIP = v.PublicHost
		}
	}
	if v.Region == "" {
		v.Region = "local"
	}
	if v.ID == "" {
		v.ID = c.Node
	}
	switch v.TLS {
	case "":
		v.TLS = "off"
	case "devca", "off":
	default:
		return v, fmt.Errorf("voice: --voice-tls %q: want devca or off", v.TLS)
	}
	return v, nil
}

func build(ctx context.Context, b *wiring.Builder) error {
	v, err := settings(b.Config)
	if err != nil {
		return err
	}
	keys, ok := wiring.Lookup(b.Seams, wiring.VoiceKeys)
	if !ok {
		return errors.New("voice: no trusted keys in the process")
	}
	l, err := b.Listen("tcp", v.Listen)
	if err != nil {
		return err
	}
	if v.TLS == "devca" {
		ca, err := devca.Ensure(b.Config.DataDir)
		if err != nil {
			return fmt.Errorf("voice: dev CA: %w", err)
		}
		tc, err := ca.ServerConfig(v.PublicHost)
		if err != nil {
			return fmt.Errorf("voice: dev CA certificate: %w", err)
		}
		l = tls.NewListener(l, tc)
		b.Logger.Info("voice gateway serves TLS from the dev CA; clients trust it with NODE_EXTRA_CA_CERTS or SSL_CERT_FILE", "ca", ca.CertPath)
	}
	_, port, _ := net.SplitHostPort(l.Addr().String())
	cfg := voice.Config{
		ID: v.ID, Node: b.Config.Node, Region: v.Region, Endpoint: net.JoinHostPort(v.PublicHost, port),
		UDPAddr: v.UDP, PublicIP: v.PublicIP, TrustedKeys: keys,
		Logger: b.Logger, Registerer: b.Metrics,
	}
	if v.WebRTCUDP != "off" {
		// Browsers reach the same calls over WebRTC, their candidates
		// advertising the address bots send RTP to.
		cfg.WebRTC = &voice.WebRTCConfig{UDPAddr: v.WebRTCUDP}
		if v.PublicIP != "" {
			cfg.WebRTC.PublicIPs = []string{v.PublicIP}
		}
		if len(v.ICEServers) > 0 {
			cfg.WebRTC.ICEServers = []voice.ICEServer{{URLs: v.ICEServers, Username: v.ICEUsername, Credential: v.ICECredential}}
		}
		if v.ICESecret != "" {
			// Each session gets its own TURN credential, minted from
			// the secret coturn shares (use-auth-secret).
			cfg.WebRTC.TURNSecret, cfg.WebRTC.TURNCredentialTTL = v.ICESecret, v.ICECredentialTTL
		}
	}
	load, remote := wiring.Lookup(b.Seams, wiring.VoiceLoad)
	if remote {
		cfg.Load = load
	}
	srv, err := voice.New(cfg)
	if err != nil {
		return fmt.Errorf("voice: %w", err)
	}
	if remote {
		// Guilds in other processes post server mute, deafen and
		// disconnect here (fleet.Registry), on the process's HTTP
		// listener, each command signed with the admission key: the
		// signature is the credential. In dev the guild calls the
		// server in-process (fleet.Local).
		b.Handle("POST "+voice.ControlPath, srv.ControlHandler())
	}
	// Drain (the operator's scale-down) and load on the process's admin
	// endpoints, behind its admin token; on a node whose only role is
	// voice, /admin/drain is this server's drain.
	srv.AdminRoutes(adminMux{b}, voiceOnly(b.Config.Roles))
	// The voice gateway's listener has the bounds of every listener of
	// the process (header and idle timeouts, connection caps).
	serving := b.Config.ServingConfig()
	hs := httpserve.NewServer(srv.Handler(), serving)
	l = httpserve.Listener(l, serving)
	if err := b.Add(lifecycle.Part{Name: "sfu", Run: srv.Run}); err != nil {
		return err
	}
	if err := b.Add(lifecycle.Part{Name: "voice gateway " + cfg.Endpoint, Run: func(ctx context.Context) error {
		errc := make(chan error, 1)
		go func() { errc <- hs.Serve(l) }()
		select {
		case err := <-errc:
			if errors.Is(err, http.ErrServerClosed) {
				return nil
			}
			return fmt.Errorf("voice gateway: %w", err)
		case <-ctx.Done():
			_ = hs.Close()
			return nil
		}
	}}); err != nil {
		return err
	}
	if f, ok := wiring.Lookup(b.Seams, wiring.VoiceFleet); ok {
		f.Add(srv)
		if err := b.Add(lifecycle.Part{Name: "fleet", Close: func() error { f.Remove(srv.ID()); return nil }}); err != nil {
			return err
		}
	}
	b.Logger.Info("voice server", "id", cfg.ID, "region", cfg.Region, "endpoint", cfg.Endpoint, "udp", srv.UDPAddr().String())
	return nil
}

// adminMux puts routes among the process's admin endpoints.
type adminMux struct{ b *wiring.Builder }

func (m adminMux) Handle(pattern string, h http.Handler) { m.b.HandleAdmin(pattern, h) }

// voiceOnly reports whether roles name the voice role alone (a `concord
// serve --roles=voice` node): its /admin/drain drains the SFU. Elsewhere
// /admin/drain stays the gateway's and the SFU drains at
// /admin/voice/drain.
func voiceOnly(roles []string) bool {
	return len(roles) == 1 && roles[0] == Name
}
