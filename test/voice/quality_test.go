package voice

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/concord-chat/concord/runtime/domain/voice"
	"github.com/concord-chat/concord/test/voice/voiceclient"
)

type voiceclientT = voiceclient.Client

// loads records every report.
type loads struct {
	mu  sync.Mutex
	got []voice.Load
	ch  chan voice.Load
	// srv, when set, has its per-call quality read with each report: the
	// server computes both before it reports, and the next period waits
	// for the report.
	srv   atomic.Pointer[voice.Server]
	calls chan []voice.CallQuality
}

func (l *loads) ReportLoad(_ context.Context, v voice.Load) error {
	if s := l.srv.Load(); s != nil && l.calls != nil {
		select {
		case l.calls <- s.CallQuality():
		default:
		}
	}
	l.mu.Lock()
	l.got = append(l.got, v)
	l.mu.Unlock()
	select {
	case l.ch <- v:
	default:
	}
	return nil
}

// TestLoadAndQuality: the load report carries calls, participants,
// forwarded packets per second and the loss the server saw in a speaker's
// sequence numbers; the same figures are metrics.
func TestLoadAndQuality(t *testing.T) {
	rep := &loads{ch: make(chan voice.Load, 64), calls: make(chan []voice.CallQuality, 64)}
	s := startSFU(t, func(c *voice.Config) { c.Load = rep; c.Endpoint = "voice.test:443"; c.Region = "eu" })
	rep.srv.Store(s.srv)
	ctx := ctxT(t)
	a := s.connect(ctx, s.newUser(channelID), "")
	s.connect(ctx, s.newUser(channelID), "")
	s.connect(ctx, s.newUser(channelID), "")
	// 20 packets, of which every fifth is never sent: 4 of 20 lost.
	for i := 0; i < 20; i++ {
		p := a.Packet(opus(30))
		if i%5 == 4 {
			continue
		}
		_, _ = a.UDP.Write(p)
	}
	s.waitCounter("concord_voice_packets_received_total", nil, 16)
	var l voice.Load
	var cq []voice.CallQuality
	for {
		select {
		case cq = <-rep.calls:
		case <-ctx.Done():
			t.Fatal("no load report")
		}
		l = <-rep.ch
		if l.LossRatio > 0 {
			break
		}
	}
	if l.Server != "sfu-test" || l.Region != "eu" || l.Endpoint != "voice.test:443" || l.Calls != 1 || l.Participants != 3 {
		t.Fatalf("load %+v", l)
	}
	// The last packet sent is #18 (index 18 is sent, 19 is skipped): 19 expected, 16 received.
	if l.LossRatio < 0.1 || l.LossRatio > 0.2 {
		t.Fatalf("loss ratio %v, want 3/19", l.LossRatio)
	}
	if got := s.counter("concord_voice_rtp_packets_lost_total", nil); got != 3 {
		t.Fatalf("lost packets metric %v, want 3", got)
	}
	s.waitCounter("concord_voice_packets_forwarded_total", nil, 32) // counted after the send
	if got := s.counter("concord_voice_packets_forwarded_total", nil); got != 32 {
		t.Fatalf("forwarded %v, want 16 packets × 2 listeners", got)
	}
	// The report lists the call's guild, and the call's own quality is
	// the period's: one call, so the server's figures.
	if len(l.Guilds) != 1 || l.Guilds[0] != guildID {
		t.Fatalf("report's guilds %v, want [%d]", l.Guilds, guildID)
	}
	if len(cq) != 1 || cq[0].Guild != "111" || cq[0].Channel != "222" || cq[0].Participants != 3 || cq[0].LossRatio != l.LossRatio {
		t.Fatalf("call quality %+v, want the call 111/222 with 3 participants and loss %v", cq, l.LossRatio)
	}
	// The series exist for the call (their value is the latest period's).
	call := map[string]string{"guild": "111", "channel": "222"}
	if got := s.counter("concord_voice_call_participants", call); got != 3 {
		t.Fatalf("concord_voice_call_participants %v, want 3", got)
	}
}

// TestCallQualitySeriesBounded: with more calls than MaxCallSeries, the
// per-call series are the worst calls only, worst first.
func TestCallQualitySeriesBounded(t *testing.T) {
	rep := &loads{ch: make(chan voice.Load, 1), calls: make(chan []voice.CallQuality, 64)}
	s := startSFU(t, func(c *voice.Config) { c.Load = rep })
	rep.srv.Store(s.srv)
	ctx := ctxT(t)
	n := voice.MaxCallSeries + 3
	var lossy *voiceclientT
	for i := 0; i < n; i++ {
		c := s.connect(ctx, s.newUser(uint64(10_000+i)), "")
		if i == n-1 {
			lossy = c
		}
	}
	// The last call's speaker loses every other packet.
	for i := 0; i < 10; i++ {
		p := lossy.Packet(opus(30))
		if i%2 == 1 && i != 9 {
			continue
		}
		_, _ = lossy.UDP.Write(p)
	}
	for {
		var cq []voice.CallQuality
		select {
		case cq = <-rep.calls:
		case <-ctx.Done():
			t.Fatal("no report with the lossy call's loss")
		}
		if len(cq) == 0 || cq[0].LossRatio == 0 {
			continue
		}
		if len(cq) != voice.MaxCallSeries || cq[0].Channel != strconv.Itoa(10_000+n-1) {
			t.Fatalf("%d call series, worst %+v; want %d, the lossy call %d first", len(cq), cq[0], voice.MaxCallSeries, 10_000+n-1)
		}
		break
	}
	mfs, err := s.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() == "concord_voice_call_loss_ratio" {
			found = true
			if len(mf.GetMetric()) != voice.MaxCallSeries {
				t.Fatalf("%d loss series, want %d", len(mf.GetMetric()), voice.MaxCallSeries)
			}
		}
	}
	if !found {
		t.Fatal("no concord_voice_call_loss_ratio series")
	}
}
