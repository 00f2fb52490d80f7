package gateway

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults used by NewNode for zero Config fields.
const (
	DefaultHeartbeatInterval = 41250 * time.Millisecond
	DefaultReplayMaxEvents   = 4096
	DefaultReplayMaxBytes    = 1 << 20
	DefaultReplayMaxAge      = 2 * time.Minute
	DefaultSendQueue         = 1024
	DefaultSendQueueBytes    = 256 << 10
	DefaultSocketSendBuffer  = 128 << 10
	DefaultMaxPayload        = 4096
	DefaultRateLimit         = 120
	DefaultRateWindow        = 60 * time.Second
	DefaultIdentifyTimeout   = 30 * time.Second
	DefaultWriteTimeout      = 10 * time.Second
	DefaultTakeoverTimeout   = 5 * time.Second
	DefaultCompressIdle      = 10 * time.Second
)

// SlowConsumerCloseCode is the close code sent to a connection whose
// outbound queue passed Config.SendQueue. 4000 ("unknown error") is
// resumable for every library: discord.js and discord.py resume after it
// and discordgo resumes after any close, so the client comes back with
// RESUME and gets the gap from the replay buffer if it still covers it.
// A socket too backed up to take the close frame within a second is
// closed without one; clients see 1006, which they also resume after.
const SlowConsumerCloseCode = CloseUnknownError

// Config configures a Node. Zero fields take the documented defaults.
type Config struct {
	// Node names this gateway node; it is event.Session.Node of every
	// session the node holds and the node name Deliver accepts.
	Node string
	// PublicURL is READY's resume_gateway_url. If empty it is derived from
	// the upgrade request as ws://<Host>/gateway (wss:// behind TLS or
	// X-Forwarded-Proto: https), never with a query string.
	PublicURL string
	// HeartbeatInterval is HELLO's heartbeat_interval. Default 41.25 s; it
	// must stay under 60 s, after which discord.py gives up on a silent
	// socket.
	HeartbeatInterval time.Duration
	// ZombieTimeout is how long a connection may go without a heartbeat
	// before the node treats it as a zombie and closes the socket (close
	// 4009, session stays resumable). Default HeartbeatInterval × 1.5.
	ZombieTimeout time.Duration
	// ReplayMaxEvents bounds each session's replay buffer by frames.
	// Default 4096.
	ReplayMaxEvents int
	// ReplayMaxBytes bounds each session's replay buffer by bytes: each
	// frame's encoded length plus its bookkeeping (32 bytes).
	// Default 1 MiB.
	ReplayMaxBytes int
	// ReplayMaxAge bounds each session's replay buffer by age and is also
	// the resume window: a detached session is kept this long, then ended
	// with Backend.Disconnect. Default 2 min.
	ReplayMaxAge time.Duration
	// CompressIdle is how long a zlib-stream or zstd-stream connection
	// may send nothing before its encoder (570-820 KB of state) goes back
	// to a node-wide pool; its next dispatch continues the same stream
	// with a fresh encoder, which costs the compression context built so
	// far (docs/benchmarks.md, issue 27). Control frames to a parked
	// connection (heartbeat ACKs) go uncompressed in the stream and wake
	// no encoder. Default 10 s.
	CompressIdle time.Duration
	// TakeoverTimeout bounds how long a RESUME for a session another
	// node holds waits for that node to hand it over (takeover.go); past
	// it the client gets op 9 d:false. Default 5 s.
	TakeoverTimeout time.Duration
	// SendQueue bounds each connection's outbound queue in frames, and
	// SendQueueBytes in bytes. A connection whose queue passes either is
	// closed with SlowConsumerCloseCode; its session stays resumable. A
	// queued dispatch shares its payload with the replay buffer, so the
	// bounds are not about memory: they cut a slow reader while what it
	// has not read (the writer's batch, the queue and the socket buffer,
	// see SocketSendBuffer) still fits in the replay buffer, so that a
	// prompt RESUME gets every missed event. Frames replayed on RESUME
	// and control frames do not count; a single frame larger than
	// SendQueueBytes is queued when the queue is empty. Defaults 1024
	// frames and 256 KiB.
	SendQueue      int
	SendQueueBytes int
	// SocketSendBuffer caps the kernel's send buffer of each gateway
	// socket (SO_SNDBUF; Linux doubles it), so that a reader that stopped
	// reading holds a bounded amount in the kernel — counted against the
	// pod's memory and beyond the replay buffer's reach otherwise (up to
	// 4 MiB with autotuning). Negative leaves the kernel's autotuning.
	// Default 128 KiB.
	SocketSendBuffer int
	// GoroutineReader reads each connection on a goroutine of its own (the
	// HTTP handler's) instead of the node's readiness poller (poll_linux.go).
	// The poller is used where the socket is a plain TCP connection on
	// Linux; this turns it off, for comparison and as a fallback.
	GoroutineReader bool
	// MaxPayload is the largest client payload in bytes (bigger → close
	// 4002). Default 4096.
	MaxPayload int
	// RateLimit is how many payloads a client may send per RateWindow
	// (more → close 4008). Defaults 120 per 60 s.
	RateLimit  int
	RateWindow time.Duration
	// IdentifyTimeout is how long a new connection may take to send
	// IDENTIFY or RESUME before it is closed with 4009. Default 30 s.
	IdentifyTimeout time.Duration
	// WriteTimeout bounds one socket write; a connection whose write does
	// not finish in time is dropped (resumably). Default 10 s.
	WriteTimeout time.Duration
	// OpHandlers handle client opcodes 3, 4, 8, 14 and 31 for identified
	// sessions. Opcodes without a handler are validated and ignored.
	OpHandlers map[int]OpHandler
	// Presence, when set, hears of sessions starting and ending and
	// receives the node's periodic re-reports (RunReports).
	Presence SessionReporter
	// Logger receives the node's logs. Default: discard.
	Logger *slog.Logger
	// Registerer receives the node's metrics. Nil: metrics are kept but
	// not registered.
	Registerer prometheus.Registerer
	// Now returns the current time; tests inject a clock. Default time.Now.
	// It drives replay buffer ages and the client rate limit window.
	Now func() time.Time
}

// withDefaults returns cfg with zero fields filled and checks the rest.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.HeartbeatInterval == 0 {
		cfg.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if cfg.HeartbeatInterval < 0 || cfg.HeartbeatInterval >= 60*time.Second {
		return cfg, fmt.Errorf("%w: heartbeat interval %v must be in (0, 60s)", ErrInvalidConfig, cfg.HeartbeatInterval)
	}
	if cfg.ZombieTimeout == 0 {
		cfg.ZombieTimeout = cfg.HeartbeatInterval * 3 / 2
	}
	if cfg.ZombieTimeout < cfg.HeartbeatInterval {
		return cfg, fmt.Errorf("%w: zombie timeout %v below heartbeat interval", ErrInvalidConfig, cfg.ZombieTimeout)
	}
	fill := func(v *int, def int) {
		if *v == 0 {
			*v = def
		}
	}
	fill(&cfg.ReplayMaxEvents, DefaultReplayMaxEvents)
	fill(&cfg.ReplayMaxBytes, DefaultReplayMaxBytes)
	fill(&cfg.SendQueue, DefaultSendQueue)
	fill(&cfg.SendQueueBytes, DefaultSendQueueBytes)
	fill(&cfg.SocketSendBuffer, DefaultSocketSendBuffer)
	fill(&cfg.MaxPayload, DefaultMaxPayload)
	fill(&cfg.RateLimit, DefaultRateLimit)
	fillDur := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	fillDur(&cfg.ReplayMaxAge, DefaultReplayMaxAge)
	fillDur(&cfg.TakeoverTimeout, DefaultTakeoverTimeout)
	fillDur(&cfg.RateWindow, DefaultRateWindow)
	fillDur(&cfg.IdentifyTimeout, DefaultIdentifyTimeout)
	fillDur(&cfg.WriteTimeout, DefaultWriteTimeout)
	fillDur(&cfg.CompressIdle, DefaultCompressIdle)
	if cfg.ReplayMaxEvents < 0 || cfg.ReplayMaxBytes < 0 || cfg.SendQueue < 0 || cfg.SendQueueBytes < 0 || cfg.MaxPayload < 0 || cfg.RateLimit < 0 {
		return cfg, fmt.Errorf("%w: negative bound", ErrInvalidConfig)
	}
	if cfg.ReplayMaxAge < 0 || cfg.TakeoverTimeout < 0 || cfg.RateWindow < 0 || cfg.IdentifyTimeout < 0 || cfg.WriteTimeout < 0 || cfg.CompressIdle < 0 {
		return cfg, fmt.Errorf("%w: negative duration", ErrInvalidConfig)
	}
	for op := range cfg.OpHandlers {
		switch op {
		case OpPresenceUpdate, OpVoiceStateUpdate, OpRequestGuildMembers, OpLazyRequest, OpRequestSoundboardSounds:
		default:
			return cfg, fmt.Errorf("%w: no handler may be set for opcode %d", ErrInvalidConfig, op)
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return cfg, nil
}
