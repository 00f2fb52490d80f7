package voice

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/pion/stun/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/voice/signaling"
)

// Config is a Server's configuration. Zero fields take the defaults stated.
type Config struct {
	// ID is this server's id; tokens naming another server are refused.
	ID string
	// Region is reported with the load (for the allocator).
	Region string
	// Node is the registry name of the process hosting the server, where
	// the guilds post its commands (ControlPath on the node's HTTP
	// address); reported with the load. Empty: the node is named ID.
	Node string
	// Endpoint is the host:port clients reach the voice gateway at, as the
	// guild puts it in VOICE_SERVER_UPDATE; reported with the load.
	Endpoint string
	// UDPAddr is the media socket's listen address. Default ":0".
	UDPAddr string
	// UDPReadBuffer is the media sockets' receive buffer (SO_RCVBUF,
	// capped by the kernel's net.core.rmem_max). It absorbs bursts, and
	// bounds how stale a packet can get when the readers fall behind:
	// what waits in it waits in line. Default 4 MiB.
	UDPReadBuffer int
	// PublicIP is the address sent in Ready for the media socket. Default:
	// the UDP socket's own address, or 127.0.0.1 when it is unspecified.
	PublicIP string
	// PublicPort overrides the port sent in Ready (a NATed host port).
	PublicPort int
	// TrustedKeys verify admission tokens. Required.
	TrustedKeys []ed25519.PublicKey
	// HeartbeatInterval is sent in Hello. Default 13.75 s, Discord's value.
	HeartbeatInterval time.Duration
	// IdentifyTimeout closes a connection that neither identifies nor
	// resumes in time (4003). Default 10 s.
	IdentifyTimeout time.Duration
	// ResumeWindow keeps a session whose socket dropped, so the client can
	// resume it; after it the user leaves the call. Default 30 s.
	ResumeWindow time.Duration
	// ReplayFrames bounds the frames a session keeps for a v8 resume.
	// Default 256.
	ReplayFrames int
	// MaxParticipants bounds one call. Default 500.
	MaxParticipants int
	// MaxConnections bounds open voice gateway WebSockets; past it the
	// upgrade is answered 503. Default 20000.
	MaxConnections int
	// Readers is the number of goroutines reading the UDP socket. Default
	// GOMAXPROCS.
	Readers int
	// Load receives this server's load every LoadInterval. Optional.
	Load LoadReporter
	// LoadInterval is the reporting period. Default 2 s.
	LoadInterval time.Duration
	// WebRTC configures the browser transport; nil disables it.
	WebRTC *WebRTCConfig
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Registerer receives the metrics; nil registers nothing.
	Registerer prometheus.Registerer
	// Now is the clock; defaults to time.Now.
	Now func() time.Time
}

// WebRTCConfig configures the WebRTC transport for browsers.
type WebRTCConfig struct {
	// UDPAddr is the ICE UDP mux's listen address (one port for every
	// peer connection). Default ":0".
	UDPAddr string
	// PublicIPs are advertised as host candidates (NAT 1:1). Default: the
	// socket's address, or 127.0.0.1 when it is unspecified.
	PublicIPs []string
	// ICEServers are handed to WebRTC clients in Ready (STUN and TURN
	// servers for their peer connections): clients that cannot reach
	// the SFU's UDP port directly relay through TURN. The SFU itself,
	// ice-lite with a public address, uses none.
	ICEServers []ICEServer
	// TURNSecret, when set, is the secret shared with the TURN servers
	// (coturn's static-auth-secret, with use-auth-secret): every session
	// gets its own time-limited credential for each TURN server of
	// ICEServers (turncred), replacing a static username and credential.
	TURNSecret string
	// TURNCredentialTTL is how long a minted credential is valid: a TURN
	// allocation cannot be refreshed past it, so it bounds a call through
	// the relay. Default 12 h.
	TURNCredentialTTL time.Duration
}

// DefaultTURNCredentialTTL is the default lifetime of a minted TURN
// credential.
const DefaultTURNCredentialTTL = 12 * time.Hour

// isTURN reports whether any of s's URLs is a TURN server's.
func isTURN(s ICEServer) bool {
	for _, u := range s.URLs {
		if uri, err := stun.ParseURI(u); err == nil && (uri.Scheme == stun.SchemeTypeTURN || uri.Scheme == stun.SchemeTypeTURNS) {
			return true
		}
	}
	return false
}

// ICEServer is one STUN or TURN server for WebRTC clients.
type ICEServer = signaling.ICEServer

// validICEServers checks each server's URLs (stun:, stuns:, turn:, turns:)
// and that TURN servers carry credentials.
func validICEServers(servers []ICEServer, minted bool) error {
	for i, s := range servers {
		if len(s.URLs) == 0 {
			return fmt.Errorf("voice: config: ICE server %d has no URL", i)
		}
		for _, u := range s.URLs {
			uri, err := stun.ParseURI(u)
			if err != nil {
				return fmt.Errorf("voice: config: ICE server URL %q: %w", u, err)
			}
			if (uri.Scheme == stun.SchemeTypeTURN || uri.Scheme == stun.SchemeTypeTURNS) && !minted && (s.Username == "" || s.Credential == "") {
				return fmt.Errorf("voice: config: TURN server %q needs a username and credential, or a TURN secret to mint them", u)
			}
		}
	}
	return nil
}

func (c *Config) fill() error {
	if c.ID == "" {
		return errors.New("voice: config: ID is required")
	}
	if len(c.TrustedKeys) == 0 {
		return errors.New("voice: config: TrustedKeys is required")
	}
	for i, k := range c.TrustedKeys {
		if len(k) != ed25519.PublicKeySize {
			return fmt.Errorf("voice: config: TrustedKeys[%d] is %d bytes", i, len(k))
		}
	}
	if c.UDPAddr == "" {
		c.UDPAddr = ":0"
	}
	if c.UDPReadBuffer <= 0 {
		c.UDPReadBuffer = 4 << 20
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = 13750 * time.Millisecond
	}
	if c.IdentifyTimeout <= 0 {
		c.IdentifyTimeout = 10 * time.Second
	}
	if c.ResumeWindow <= 0 {
		c.ResumeWindow = 30 * time.Second
	}
	if c.ReplayFrames <= 0 {
		c.ReplayFrames = 256
	}
	if c.MaxParticipants <= 0 {
		c.MaxParticipants = 500
	}
	if c.MaxConnections <= 0 {
		c.MaxConnections = 20000
	}
	if c.LoadInterval <= 0 {
		c.LoadInterval = 2 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.WebRTC != nil {
		if err := validICEServers(c.WebRTC.ICEServers, c.WebRTC.TURNSecret != ""); err != nil {
			return err
		}
		if c.WebRTC.TURNCredentialTTL <= 0 {
			c.WebRTC.TURNCredentialTTL = DefaultTURNCredentialTTL
		}
	}
	if c.PublicIP != "" && net.ParseIP(c.PublicIP).To4() == nil {
		return fmt.Errorf("voice: config: PublicIP %q is not IPv4 (clients accept only IPv4)", c.PublicIP)
	}
	return nil
}

// Load is what a server reports for the allocator.
type Load struct {
	Server   string
	Region   string
	Endpoint string
	// Node is Config.Node: the registry node serving ControlPath.
	Node string `json:",omitempty"`
	// Calls and Participants are the calls hosted and the users in them.
	Calls        int
	Participants int
	// PacketsIn and PacketsForwarded are per second over the last period.
	PacketsIn        float64
	PacketsForwarded float64
	// LossRatio is the share of speakers' packets that never arrived, over
	// the last period; Jitter their mean interarrival jitter.
	LossRatio float64
	Jitter    time.Duration
	// RTT is the mean round trip WebRTC listeners reported over the last
	// period (RTCP receiver reports); zero without reports.
	RTT time.Duration `json:",omitempty"`
	// Guilds are the guilds with a call here, ascending: a guild node
	// loading a guild asks only these servers for its roster (roster.go).
	Guilds []snowflake.ID `json:",omitempty"`
	// GuildsOmitted says the server hosts more than MaxReportedGuilds
	// guilds and lists none: it is asked for every guild's roster.
	GuildsOmitted bool `json:",omitempty"`
	// Draining servers take no new calls.
	Draining bool
	At       time.Time
}

// LoadReporter publishes a server's load (to the registry the guild reads).
// ReportLoad is called every LoadInterval; an error is logged and the next
// report tried as usual, so an implementation should give its entry a TTL
// of a few periods and let a dead server drop out.
type LoadReporter interface {
	ReportLoad(ctx context.Context, l Load) error
}
