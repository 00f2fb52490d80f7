package voice

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/voice"
	"github.com/concord-chat/concord/runtime/domain/voice/devca"
	"github.com/concord-chat/concord/runtime/domain/voice/token"
	"github.com/concord-chat/concord/test/voice/voiceclient"
)

const (
	guildID   = 111
	channelID = 222
)

// sfu is a voice server on loopback behind TLS from a dev CA.
type sfu struct {
	t        testing.TB
	srv      *voice.Server
	key      ed25519.PrivateKey
	reg      *prometheus.Registry
	endpoint string
	tls      *tls.Config // client side, trusting the CA
	caPath   string
	dataDir  string
}

var nextUser atomic.Uint64

func startSFU(t testing.TB, mutate func(*voice.Config)) *sfu {
	t.Helper()
	key, err := token.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	logger := testLogger(t)
	dir := t.TempDir()
	ca, err := devca.Ensure(dir)
	if err != nil {
		t.Fatal(err)
	}
	stls, err := ca.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", stls)
	if err != nil {
		t.Fatal(err)
	}
	cfg := voice.Config{
		ID: "sfu-test", Region: "local", UDPAddr: "127.0.0.1:0", Endpoint: l.Addr().String(),
		TrustedKeys: []ed25519.PublicKey{key.Public().(ed25519.PublicKey)},
		Logger:      logger, Registerer: reg, LoadInterval: 200 * time.Millisecond,
		ResumeWindow: 5 * time.Second,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	srv, err := voice.New(cfg)
	if err != nil {
		l.Close()
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 5 * time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	go func() { _ = hs.Serve(l) }()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = hs.Close()
	})
	return &sfu{t: t, srv: srv, key: key, reg: reg, endpoint: l.Addr().String(),
		tls: &tls.Config{RootCAs: ca.Pool()}, caPath: ca.CertPath, dataDir: dir}
}

// user is the identity a guild would hand out with a token.
type user struct {
	id      uint64
	session string
	channel uint64
}

func (s *sfu) newUser(channel uint64) user {
	id := 1000 + nextUser.Add(1)
	return user{id: id, session: "sess-" + strconv.FormatUint(id, 10), channel: channel}
}

// token signs what the guild would for u on this server.
func (s *sfu) token(u user, mutate func(*token.Claims)) string {
	s.t.Helper()
	c := token.Claims{UserID: snowflake.ID(u.id), GuildID: guildID, ChannelID: snowflake.ID(u.channel), Server: "sfu-test", SessionID: u.session}
	if mutate != nil {
		mutate(&c)
	}
	tok, err := token.Sign(s.key, c, time.Now())
	if err != nil {
		s.t.Fatal(err)
	}
	return tok
}

func (s *sfu) options(u user, tok string) voiceclient.Options {
	return voiceclient.Options{Endpoint: s.endpoint, GuildID: guildID, UserID: u.id, SessionID: u.session, Token: tok, TLS: s.tls}
}

// connect joins u to its channel with the whole handshake.
func (s *sfu) connect(ctx context.Context, u user, mode string) *voiceclient.Client {
	s.t.Helper()
	o := s.options(u, s.token(u, nil))
	o.Mode = mode
	c, err := voiceclient.Connect(ctx, o)
	if err != nil {
		s.t.Fatalf("connect user %d: %v", u.id, err)
	}
	s.t.Cleanup(c.Close)
	return c
}

// counter reads a metric of the server by name and label values.
func (s *sfu) counter(name string, labels map[string]string) float64 {
	s.t.Helper()
	mfs, err := s.reg.Gather()
	if err != nil {
		s.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if matches(m, labels) {
				switch {
				case m.Counter != nil:
					return m.GetCounter().GetValue()
				case m.Gauge != nil:
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return 0
}

func matches(m *dto.Metric, labels map[string]string) bool {
	for k, v := range labels {
		found := false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == k && lp.GetValue() == v {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// waitCounter polls a metric until it reaches at least want. Metrics have
// no event to await; the poll is bounded and fails with the last value.
func (s *sfu) waitCounter(name string, labels map[string]string, want float64) {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := s.counter(name, labels)
		if got >= want {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s%v = %v, want >= %v", name, labels, got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func rawUDP(t *testing.T, to string) *net.UDPConn {
	t.Helper()
	ra, err := net.ResolveUDPAddr("udp4", to)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialUDP("udp4", nil, ra)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
