package voice

import (
	"context"
	"sync"
	"testing"

	"github.com/concord-chat/concord/runtime/voice"
)

// loads records every report.
type loads struct {
	mu  sync.Mutex
	got []voice.Load
	ch  chan voice.Load
}

func (l *loads) ReportLoad(_ context.Context, v voice.Load) error {
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
	rep := &loads{ch: make(chan voice.Load, 64)}
	s := startSFU(t, func(c *voice.Config) { c.Load = rep; c.Endpoint = "voice.test:443"; c.Region = "eu" })
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
	for {
		select {
		case l = <-rep.ch:
		case <-ctx.Done():
			t.Fatal("no load report with the loss")
		}
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
	if got := s.counter("concord_voice_packets_forwarded_total", nil); got != 32 {
		t.Fatalf("forwarded %v, want 16 packets × 2 listeners", got)
	}
}
