package voice

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Drop reasons, the values of concord_voice_packets_dropped_total's reason.
const (
	dropUnbound     = "unbound_address" // source never completed IP discovery
	dropMalformed   = "malformed"
	dropOversize    = "oversize"
	dropSSRC        = "ssrc_mismatch" // a bound address sent another SSRC
	dropNoKey       = "no_session_key"
	dropAuth        = "bad_tag"
	dropReplay      = "replayed"
	dropRTCP        = "rtcp"
	dropDiscovery   = "bad_discovery"
	dropUnsupported = "unsupported_payload"
	dropMuted       = "server_muted"
)

var dropReasons = []string{dropUnbound, dropMalformed, dropOversize, dropSSRC, dropNoKey, dropAuth, dropReplay, dropRTCP, dropDiscovery, dropUnsupported, dropMuted}

// metrics are a server's Prometheus collectors, all labelled with its id.
type metrics struct {
	packetsIn        prometheus.Counter
	packetsForwarded prometheus.Counter
	bytesForwarded   prometheus.Counter
	keepalives       prometheus.Counter
	discoveries      prometheus.Counter
	dropped          map[string]prometheus.Counter
	droppedVec       *prometheus.CounterVec
	sendErrors       prometheus.Counter
	lost             prometheus.Counter
	jitter           prometheus.Histogram
	lossRatio        prometheus.Gauge
	forwardRate      prometheus.Gauge
	forwardPerCPU    prometheus.Gauge
	kernelUDP        *udpCollector
	calls            prometheus.Gauge
	participants     prometheus.Gauge
	sessions         prometheus.Gauge
	closes           *prometheus.CounterVec
	tokensRejected   *prometheus.CounterVec
	commands         *prometheus.CounterVec
	turnMinted       prometheus.Counter
	resumes          prometheus.Counter
	nacks            prometheus.Counter
	plis             prometheus.Counter
	retransmitted    prometheus.Counter
	layerSwitches    prometheus.Counter
	rtt              prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer, server string) (*metrics, error) {
	l := prometheus.Labels{"server": server}
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: l})
	}
	g := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: l})
	}
	m := &metrics{
		packetsIn:        c("concord_voice_packets_received_total", "Authenticated RTP packets received from speakers."),
		packetsForwarded: c("concord_voice_packets_forwarded_total", "RTP packets sent to listeners (one per listener per packet)."),
		bytesForwarded:   c("concord_voice_forwarded_bytes_total", "Bytes of RTP sent to listeners."),
		keepalives:       c("concord_voice_keepalives_total", "8-byte UDP keepalives received from bound addresses."),
		discoveries:      c("concord_voice_ip_discoveries_total", "IP discovery requests answered."),
		droppedVec: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "concord_voice_packets_dropped_total",
			Help: "UDP datagrams dropped, by reason.", ConstLabels: l}, []string{"reason"}),
		sendErrors: c("concord_voice_send_errors_total", "UDP writes to listeners that failed."),
		lost:       c("concord_voice_rtp_packets_lost_total", "Speakers' RTP packets never received (sequence gaps)."),
		jitter: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "concord_voice_rtp_jitter_seconds",
			Help: "Interarrival jitter of speakers' streams (RFC 3550), the mean of each call's streams sampled every load period.", ConstLabels: l,
			Buckets: []float64{.001, .002, .005, .01, .02, .04, .08, .16}}),
		lossRatio:   g("concord_voice_rtp_loss_ratio", "Share of speakers' packets lost over the last load period."),
		forwardRate: g("concord_voice_packets_forwarded_per_second", "Packets forwarded per second over the last load period."),
		forwardPerCPU: g("concord_voice_packets_forwarded_per_cpu_second",
			"Packets forwarded per second of the process's CPU time over the last load period: packets per core when busy."),
		kernelUDP:    newUDPCollector(server, snmpPath),
		calls:        g("concord_voice_calls", "Calls hosted."),
		participants: g("concord_voice_participants", "Participants in calls."),
		sessions:     g("concord_voice_gateway_sessions", "Voice gateway sessions held, attached or waiting for a resume."),
		closes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "concord_voice_gateway_closes_total",
			Help: "Voice gateway connections closed by the server, by close code.", ConstLabels: l}, []string{"code"}),
		tokensRejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "concord_voice_tokens_rejected_total",
			Help: "Identify and resume attempts refused, by reason.", ConstLabels: l}, []string{"reason"}),
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "concord_voice_control_commands_total",
			Help: "Guild commands (server mute and deafen, disconnect) received over HTTP, by result: applied, not_connected, stale, roster, or why it was refused.", ConstLabels: l}, []string{"result"}),
		turnMinted: c("concord_voice_turn_credentials_minted_total", "Sessions handed TURN credentials minted for them from the TURN secret."),
		resumes:    c("concord_voice_gateway_resumes_total", "Successful voice gateway resumes."),
		nacks:      c("concord_voice_rtcp_nacks_total", "Generic NACKs received from WebRTC listeners."),
		plis:       c("concord_voice_rtcp_plis_total", "Picture loss indications received from WebRTC listeners."),
		retransmitted: c("concord_voice_rtp_retransmitted_packets_total",
			"Video packets sent again to WebRTC listeners that NACKed them."),
		layerSwitches: c("concord_voice_simulcast_layer_switches_total",
			"Simulcast layer changes made for a WebRTC subscriber (each at a keyframe of the new layer)."),
		rtt: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "concord_voice_rtcp_rtt_seconds",
			Help: "Round-trip times from RTCP receiver reports of WebRTC peers.", ConstLabels: l,
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .2, .4}}),
	}
	m.dropped = make(map[string]prometheus.Counter, len(dropReasons))
	for _, r := range dropReasons {
		m.dropped[r] = m.droppedVec.WithLabelValues(r)
	}
	if reg == nil {
		return m, nil
	}
	for _, col := range []prometheus.Collector{m.packetsIn, m.packetsForwarded, m.bytesForwarded, m.keepalives, m.discoveries,
		m.droppedVec, m.sendErrors, m.lost, m.jitter, m.lossRatio, m.forwardRate, m.forwardPerCPU, m.kernelUDP, m.calls, m.participants, m.sessions,
		m.closes, m.tokensRejected, m.commands, m.turnMinted, m.resumes, m.nacks, m.plis, m.retransmitted, m.layerSwitches, m.rtt} {
		if err := reg.Register(col); err != nil {
			return nil, fmt.Errorf("voice: register metrics: %w", err)
		}
	}
	return m, nil
}
