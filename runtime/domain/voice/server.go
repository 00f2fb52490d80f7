package voice

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/voice/signaling"
	"github.com/concord-chat/concord/runtime/domain/voice/token"
)

// Server is one SFU: the voice gateway, the UDP media socket and the calls.
type Server struct {
	cfg      Config
	m        *metrics
	verifier token.Verifier
	md       *media
	rtc      *rtcTransport // nil when WebRTC is off
	udpAddr  netip.AddrPort
	publicIP string

	mu       sync.Mutex
	sessions map[string]*session // by gateway session id
	calls    map[callKey]*call
	used     map[string]time.Time // token nonces seen, until their expiry
	// mods are the latest server mute and deafen the guild set per user
	// (control.go), applied to a join whose token predates them.
	mods map[modKey]voiceMod
	// selfs are the latest self mute and deafen per user (roster.go).
	selfs map[modKey]voiceMod

	conns    atomic.Int64 // open voice gateway connections
	draining atomic.Bool
	started  atomic.Bool
	// drainMu guards drainDeadline, set by the first Drain.
	drainMu       sync.Mutex
	drainDeadline time.Time
	// lastReport is the last period's load, as reported.
	lastReport atomic.Pointer[Load]
	// cq is the last period's per-call quality (callquality.go).
	cq *callQualities
	// reportNow asks Run for a load report before the period ends (a
	// drain: the guilds should see it at once).
	reportNow chan struct{}
}

// New validates cfg, opens the UDP socket and returns the server. Nothing
// is served until Run.
func New(cfg Config) (*Server, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Registerer, cfg.ID)
	if err != nil {
		return nil, err
	}
	if cfg.Readers <= 0 {
		cfg.Readers = runtime.GOMAXPROCS(0)
	}
	conns, err := listenUDP(cfg.UDPAddr, cfg.Readers, cfg.UDPReadBuffer)
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg:      cfg,
		m:        m,
		verifier: token.Verifier{Keys: cfg.TrustedKeys},
		md:       &media{conns: conns, m: m, addrs: map[netip.AddrPort]*participant{}, ssrcs: map[uint32]*participant{}},
		udpAddr:  conns[0].LocalAddr().(*net.UDPAddr).AddrPort(),
		sessions: map[string]*session{},
		calls:    map[callKey]*call{},
		used:     map[string]time.Time{},
		mods:     map[modKey]voiceMod{},
		selfs:    map[modKey]voiceMod{},

		reportNow: make(chan struct{}, 1),
		cq:        &callQualities{},
	}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(newCallCollector(s.cq, cfg.ID)); err != nil {
			s.md.close()
			return nil, fmt.Errorf("voice: register call metrics: %w", err)
		}
	}
	s.publicIP = cfg.PublicIP
	if s.publicIP == "" {
		s.publicIP = "127.0.0.1"
		if a := s.udpAddr.Addr().Unmap(); a.Is4() && !a.IsUnspecified() {
			s.publicIP = a.String()
		}
	}
	if cfg.WebRTC != nil {
		if s.rtc, err = newRTCTransport(s, *cfg.WebRTC); err != nil {
			s.md.close()
			return nil, err
		}
	}
	return s, nil
}

// UDPAddr is the media socket's local address.
func (s *Server) UDPAddr() netip.AddrPort { return s.udpAddr }

// ID is the server's id.
func (s *Server) ID() string { return s.cfg.ID }

// Run reads media and reports load until ctx is done, then closes every
// session (4015: clients resume elsewhere) and the sockets.
func (s *Server) Run(ctx context.Context) error {
	if !s.started.CompareAndSwap(false, true) {
		return errors.New("voice: Run called twice")
	}
	var wg sync.WaitGroup
	for _, conn := range s.md.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = newForwarder(s, conn).run(ctx)
		}()
	}
	t := time.NewTicker(s.cfg.LoadInterval)
	defer t.Stop()
	last := s.counters()
	lastAt := s.cfg.Now()
	report := func() {
		now := s.cfg.Now()
		cur := s.counters()
		l := s.load(now, now.Sub(lastAt), last, cur)
		last, lastAt = cur, now
		s.lastReport.Store(&l)
		s.sweepNonces(now)
		if s.cfg.Load != nil {
			rctx, cancel := context.WithTimeout(ctx, s.cfg.LoadInterval)
			if err := s.cfg.Load.ReportLoad(rctx, l); err != nil && ctx.Err() == nil {
				s.cfg.Logger.Warn("voice load report failed", "server", s.cfg.ID, "err", err)
			}
			cancel()
		}
	}
	// The first report goes out at once: until it is in the registry the
	// guild tier does not know this server, and a call placed in the
	// first interval after start would find no server.
	report()
	for {
		select {
		case <-ctx.Done():
			s.shutdown()
			s.md.close()
			if s.rtc != nil {
				s.rtc.close()
			}
			wg.Wait()
			return nil
		case <-t.C:
		case <-s.reportNow:
			// Early reports (a drain, a guild's first call) come at most
			// every minEarlyReport: a burst of new calls is one write.
			if wait := minEarlyReport - s.cfg.Now().Sub(lastAt); wait > 0 {
				select {
				case <-ctx.Done():
					continue
				case <-time.After(wait):
				}
			}
		}
		report()
	}
}

// Disconnect removes a user from a call (kicked, moved or the channel
// deleted): its voice gateway closes with 4014, which clients obey without
// reconnecting. It reports whether the user was connected.
func (s *Server) Disconnect(guild, channel, user snowflake.ID) bool {
	s.mu.Lock()
	var victim *session
	for _, se := range s.sessions {
		if se.claims.GuildID == guild && se.claims.ChannelID == channel && se.claims.UserID == user {
			victim = se
			break
		}
	}
	s.mu.Unlock()
	if victim == nil {
		return false
	}
	victim.end(signaling.CloseDisconnected, "disconnected")
	return true
}

// SetServerVoiceState applies the guild's server mute and deafen to a user
// in a call (PATCH /guilds/{id}/members/{user} with mute or deaf): a muted
// user's packets are not forwarded, a deafened user is sent none. It
// reports whether the user was connected.
func (s *Server) SetServerVoiceState(guild, channel, user snowflake.ID, mute, deaf bool) bool {
	applied, _ := s.setVoiceState(guild, channel, user, mute, deaf, s.cfg.Now())
	return applied
}

// setVoiceState records the state decided at issued and applies it to the
// user in the call, unless a later decision was recorded already (stale).
func (s *Server) setVoiceState(guild, channel, user snowflake.ID, mute, deaf bool, issued time.Time) (applied, stale bool) {
	return s.recordMod(s.mods, guild, channel, user, voiceMod{mute: mute, deaf: deaf, at: issued}, func(p *participant) {
		p.mute.Store(mute)
		p.deaf.Store(deaf)
	})
}

// recordMod records m, a mute and deafen decision, in table (the server's
// or the users' own, both under s.mu) and applies it with set to the user
// in the call, unless a later decision was recorded already (stale). One
// recorded before the user joins applies to the join.
func (s *Server) recordMod(table map[modKey]voiceMod, guild, channel, user snowflake.ID, m voiceMod, set func(*participant)) (applied, stale bool) {
	s.mu.Lock()
	k := modKey{guild, user}
	if prev, ok := table[k]; ok && prev.at.After(m.at) {
		s.mu.Unlock()
		return false, true
	}
	table[k] = m
	c := s.calls[callKey{guild, channel}]
	s.mu.Unlock()
	if c == nil {
		return false, false
	}
	found := false
	for _, p := range c.snapshot() {
		if p.userID == user {
			set(p)
			found = true
		}
	}
	return found, false
}

// LastReport returns the load of the last report period (its rates and
// quality), or false before the first.
func (s *Server) LastReport() (Load, bool) {
	if l := s.lastReport.Load(); l != nil {
		return *l, true
	}
	return Load{}, false
}

// Load returns the current load (rates are zero: they need a period).
func (s *Server) Load() Load {
	return s.load(s.cfg.Now(), 0, s.counters(), s.counters())
}

// counterSnap is the server's packet counters and the process's CPU
// seconds at one instant.
type counterSnap struct{ in, fwd, cpu float64 }

func (s *Server) counters() counterSnap {
	return counterSnap{in: counterValue(s.m.packetsIn), fwd: counterValue(s.m.packetsForwarded), cpu: processCPUSeconds()}
}

func (s *Server) load(now time.Time, period time.Duration, prev, cur counterSnap) Load {
	l := Load{Server: s.cfg.ID, Region: s.cfg.Region, Endpoint: s.cfg.Endpoint, Node: s.cfg.Node, Draining: s.draining.Load(), At: now}
	s.mu.Lock()
	calls := make([]*call, 0, len(s.calls))
	for _, c := range s.calls {
		calls = append(calls, c)
	}
	s.mu.Unlock()
	if l.Guilds = s.hostedGuilds(); len(l.Guilds) > MaxReportedGuilds {
		l.Guilds, l.GuildsOmitted = nil, true
	}
	var expected, lost uint64
	var jitterSum, rttSum time.Duration
	var streams int
	var rttN int64
	commit := period > 0
	var perCall []CallQuality
	for _, c := range calls {
		q, e, lo, js, n, rs, rn := callPeriod(c, commit)
		l.Participants += q.Participants
		expected, lost, jitterSum, streams, rttSum, rttN = expected+e, lost+lo, jitterSum+js, streams+n, rttSum+rs, rttN+rn
		if commit {
			if n > 0 {
				s.m.jitter.Observe(q.Jitter.Seconds())
			}
			perCall = append(perCall, q)
		}
	}
	if commit {
		s.cq.set(perCall)
	}
	if rttN > 0 {
		l.RTT = rttSum / time.Duration(rttN)
	}
	l.Calls = len(calls)
	if expected > 0 {
		l.LossRatio = float64(lost) / float64(expected)
	}
	if streams > 0 {
		l.Jitter = jitterSum / time.Duration(streams)
	}
	if period > 0 {
		l.PacketsIn = (cur.in - prev.in) / period.Seconds()
		l.PacketsForwarded = (cur.fwd - prev.fwd) / period.Seconds()
		s.m.forwardRate.Set(l.PacketsForwarded)
		if cpu := cur.cpu - prev.cpu; cpu > 0 {
			// The process's CPU: the SFU's alone in its own pod, every
			// role's in `concord dev`.
			s.m.forwardPerCPU.Set((cur.fwd - prev.fwd) / cpu)
		}
		s.m.lossRatio.Set(l.LossRatio)
	}
	s.m.calls.Set(float64(l.Calls))
	s.m.participants.Set(float64(l.Participants))
	return l
}

// MaxReportedGuilds bounds Load.Guilds, so a report stays a small
// registry value; a server hosting more sets Load.GuildsOmitted instead.
const MaxReportedGuilds = 2000

// minEarlyReport is the least time between a report and an early one.
const minEarlyReport = 250 * time.Millisecond

// hostsGuildLocked reports whether a call of guild is here; s.mu is held.
func (s *Server) hostsGuildLocked(guild snowflake.ID) bool {
	for k := range s.calls {
		if k.guild == guild {
			return true
		}
	}
	return false
}

// Handler serves the voice gateway WebSocket (any path; the libraries use
// "/" and "" with ?v=4 or ?v=8). Serve it behind TLS: clients dial wss://.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveWS) }

// newSSRC picks an SSRC no participant on this server holds.
func (s *Server) newSSRC() uint32 {
	var b [4]byte
	for {
		_, _ = rand.Read(b[:])
		v := binary.BigEndian.Uint32(b[:])
		if v != 0 && s.md.bySSRC(v) == nil {
			return v
		}
	}
}

// useNonce records a token's nonce; false means it was used before.
func (s *Server) useNonce(nonce string, exp time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, seen := s.used[nonce]; seen {
		return false
	}
	s.used[nonce] = exp
	return true
}

func (s *Server) sweepNonces(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for n, exp := range s.used {
		if now.After(exp) {
			delete(s.used, n)
		}
	}
	for _, mods := range []map[modKey]voiceMod{s.mods, s.selfs} {
		for k, m := range mods {
			// Past a token's lifetime every join carries a newer state.
			if now.Sub(m.at) > token.TTL {
				delete(mods, k)
			}
		}
	}
}

// join puts p into its call, creating the call on first join.
func (s *Server) join(p *participant, k callKey) bool {
	s.mu.Lock()
	c := s.calls[k]
	newGuild := false
	if c == nil {
		newGuild = !s.hostsGuildLocked(k.guild)
		c = newCall(k)
		s.calls[k] = c
	}
	s.mu.Unlock()
	if newGuild {
		// The fleet finds a guild's calls through the guilds each load
		// report lists (Load.Guilds): list a new one at once, so that a
		// guild rebuilding its voice states right after finds this call.
		select {
		case s.reportNow <- struct{}{}:
		default:
		}
	}
	p.call = c
	if !c.add(p, s.cfg.MaxParticipants) {
		return false
	}
	s.md.register(p)
	return true
}

// leave takes p out of its call, dropping the call when it empties.
func (s *Server) leave(p *participant) {
	s.md.unregister(p)
	if p.call.remove(p) == 0 {
		s.mu.Lock()
		if c := s.calls[p.call.key]; c == p.call && len(c.snapshot()) == 0 {
			delete(s.calls, p.call.key)
		}
		s.mu.Unlock()
	}
	if b := p.sink.Load(); b != nil {
		if c, ok := b.l.(interface{ close() }); ok {
			c.close()
		}
	}
	// Browsers listening free the slot this speaker had.
	for _, m := range p.call.snapshot() {
		if b := m.sink.Load(); b != nil {
			if r, ok := b.l.(interface{ release(*participant) }); ok {
				r.release(p)
			}
		}
	}
}

// shutdown ends every session with 4015 (voice server crashed: resume).
func (s *Server) shutdown() {
	s.mu.Lock()
	all := make([]*session, 0, len(s.sessions))
	for _, se := range s.sessions {
		all = append(all, se)
	}
	s.mu.Unlock()
	for _, se := range all {
		se.end(signaling.CloseServerCrashed, "voice server shutting down")
	}
}
