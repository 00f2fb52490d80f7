package voice

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/voice/rtpsize"
	"github.com/concord-chat/concord/runtime/domain/voice/signaling"
	"github.com/concord-chat/concord/test/voice/voiceclient"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func opus(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// speakingOf waits for op 5 naming uid and returns its SSRC.
func speakingOf(t *testing.T, ctx context.Context, c *voiceclient.Client, uid uint64) uint32 {
	t.Helper()
	for {
		f, err := c.Next(ctx, signaling.OpSpeaking)
		if err != nil {
			t.Fatalf("waiting for speaking of %d: %v", uid, err)
		}
		var sp struct {
			UserID string `json:"user_id"`
			SSRC   uint32 `json:"ssrc"`
		}
		if err := json.Unmarshal(f.D, &sp); err != nil {
			t.Fatal(err)
		}
		if sp.UserID == strconv.FormatUint(uid, 10) {
			return sp.SSRC
		}
	}
}

// TestTwoClientsHearEachOther: each mode, each direction, every payload
// byte-identical, the speaker's SSRC announced with its user id.
func TestTwoClientsHearEachOther(t *testing.T) {
	for _, mode := range rtpsize.Modes {
		t.Run(mode, func(t *testing.T) {
			s := startSFU(t, nil)
			ctx := ctxT(t)
			ua, ub := s.newUser(channelID), s.newUser(channelID)
			a := s.connect(ctx, ua, mode)
			b := s.connect(ctx, ub, mode)
			if a.Mode != mode || len(a.Key) != 32 || bytes.Equal(a.Key, b.Key) {
				t.Fatalf("session description: mode %q key %d bytes, keys distinct %v", a.Mode, len(a.Key), !bytes.Equal(a.Key, b.Key))
			}
			// B learns A is there (op 11) when A was first: A learns of B.
			f, err := a.Next(ctx, signaling.OpClientsConnect)
			if err != nil || !bytes.Contains(f.D, []byte(strconv.FormatUint(ub.id, 10))) {
				t.Fatalf("A's clients connect: %s %v", f.D, err)
			}
			a.Speaking(true)
			if got := speakingOf(t, ctx, b, ua.id); got != a.Ready.SSRC {
				t.Fatalf("B was told A's ssrc %d, A has %d", got, a.Ready.SSRC)
			}
			for dir, pair := range [][2]*voiceclient.Client{{a, b}, {b, a}} {
				from, to := pair[0], pair[1]
				var sent [][]byte
				for i := 0; i < 50; i++ {
					p := opus(40 + i)
					sent = append(sent, p)
					if err := from.SendOpus(p); err != nil {
						t.Fatal(err)
					}
				}
				for i := range sent {
					r, err := to.Recv(time.Now().Add(5 * time.Second))
					if err != nil {
						t.Fatalf("dir %d packet %d: %v", dir, i, err)
					}
					if r.SSRC != from.Ready.SSRC || !bytes.Equal(r.Payload, sent[i]) {
						t.Fatalf("dir %d packet %d: ssrc %d payload differs (%d vs %d bytes)", dir, i, r.SSRC, len(r.Payload), len(sent[i]))
					}
				}
			}
			s.waitCounter("concord_voice_packets_forwarded_total", nil, 100)
		})
	}
}

// TestOtherCallHearsNothing: a call's audio never reaches another call.
func TestOtherCallHearsNothing(t *testing.T) {
	s := startSFU(t, nil)
	ctx := ctxT(t)
	a := s.connect(ctx, s.newUser(channelID), "")
	b := s.connect(ctx, s.newUser(channelID), "")
	other := s.connect(ctx, s.newUser(channelID+1), "")
	for i := 0; i < 10; i++ {
		_ = a.SendOpus(opus(30))
	}
	for i := 0; i < 10; i++ {
		if _, err := b.Recv(time.Now().Add(3 * time.Second)); err != nil {
			t.Fatalf("same call: %v", err)
		}
	}
	if r, err := other.Recv(time.Now().Add(300 * time.Millisecond)); err == nil {
		t.Fatalf("another channel received a packet from ssrc %d", r.SSRC)
	}
}

// TestVersion4 speaks the v4 gateway: bare heartbeat nonces, no seq.
func TestVersion4(t *testing.T) {
	s := startSFU(t, nil)
	ctx := ctxT(t)
	u := s.newUser(channelID)
	o := s.options(u, s.token(u, nil))
	o.Version = 4
	c, err := voiceclient.Connect(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SendOp(signaling.OpHeartbeat, 12345)
	f, err := c.Next(ctx, signaling.OpHeartbeatAck)
	if err != nil || string(f.D) != "12345" {
		t.Fatalf("v4 heartbeat ack %s %v", f.D, err)
	}
	if c.SeqAck() != -1 {
		t.Fatalf("v4 frames carried seq %d", c.SeqAck())
	}
	c8 := s.connect(ctx, s.newUser(channelID), "")
	c8.SendOp(signaling.OpHeartbeat, map[string]any{"t": 777, "seq_ack": 1})
	f, err = c8.Next(ctx, signaling.OpHeartbeatAck)
	if err != nil || string(f.D) != `{"t":777}` {
		t.Fatalf("v8 heartbeat ack %s %v", f.D, err)
	}
	if c8.SeqAck() < 1 {
		t.Fatalf("v8 frames carry no seq")
	}
}

// TestLeaveAndKick: a normal closure tells the others (op 13); the guild's
// Disconnect closes with 4014.
func TestLeaveAndKick(t *testing.T) {
	s := startSFU(t, nil)
	ctx := ctxT(t)
	ua, ub, uc := s.newUser(channelID), s.newUser(channelID), s.newUser(channelID)
	a := s.connect(ctx, ua, "")
	b := s.connect(ctx, ub, "")
	c := s.connect(ctx, uc, "")
	a.Close()
	f, err := b.Next(ctx, signaling.OpClientDisconnect)
	if err != nil || !bytes.Contains(f.D, []byte(`"`+strconv.FormatUint(ua.id, 10)+`"`)) {
		t.Fatalf("client disconnect: %s %v", f.D, err)
	}
	if !s.srv.Disconnect(guildID, channelID, snowflake.ID(uc.id)) {
		t.Fatal("Disconnect found no session")
	}
	code, err := c.WaitClosed(ctx)
	if err != nil || code != signaling.CloseDisconnected {
		t.Fatalf("kicked client closed with %d (%v), want 4014", code, err)
	}
	if s.srv.Disconnect(guildID, channelID, snowflake.ID(uc.id)) {
		t.Fatal("second Disconnect found the session again")
	}
}

// TestResumeReplaysMissedFrames: a dropped socket resumes within the
// window; what was sent meanwhile is replayed after op 9; media kept
// flowing over UDP all along.
func TestResumeReplaysMissedFrames(t *testing.T) {
	s := startSFU(t, nil)
	ctx := ctxT(t)
	ua, ub := s.newUser(channelID), s.newUser(channelID)
	a := s.connect(ctx, ua, "")
	b := s.connect(ctx, ub, "")
	if _, err := a.Next(ctx, signaling.OpClientsConnect); err != nil {
		t.Fatal(err)
	}
	ack := a.SeqAck()
	a.Drop()
	// While A is away: B speaks and C joins; both are frames for A.
	b.Speaking(true)
	uc := s.newUser(channelID)
	s.connect(ctx, uc, "")
	p := opus(64)
	if err := b.SendOpus(p); err != nil {
		t.Fatal(err)
	}
	if r, err := a.Recv(time.Now().Add(3 * time.Second)); err != nil || !bytes.Equal(r.Payload, p) {
		t.Fatalf("media during the drop: %v", err)
	}
	a2, err := a.Resume(ctx, ack)
	if err != nil {
		t.Fatal(err)
	}
	defer a2.Close()
	if _, err := a2.Next(ctx, signaling.OpResumed); err != nil {
		t.Fatalf("resumed: %v", err)
	}
	if got := speakingOf(t, ctx, a2, ub.id); got != b.Ready.SSRC {
		t.Fatalf("replayed speaking ssrc %d", got)
	}
	f, err := a2.Next(ctx, signaling.OpClientsConnect)
	if err != nil || !bytes.Contains(f.D, []byte(strconv.FormatUint(uc.id, 10))) {
		t.Fatalf("replayed clients connect: %s %v", f.D, err)
	}
	s.waitCounter("concord_voice_gateway_resumes_total", nil, 1)

	// A resume with a token that is not the session's fails with 4004.
	o := s.options(ua, s.token(ua, nil))
	bad, err := voiceclient.Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	bad.SendOp(signaling.OpResume, map[string]any{"server_id": strconv.Itoa(guildID), "session_id": ua.session, "token": "cv1.x.y", "seq_ack": 0})
	if code, _ := bad.WaitClosed(ctx); code != signaling.CloseAuthFailed {
		t.Fatalf("resume with a wrong token: close %d, want 4004", code)
	}
	// Resuming a session that does not exist: 4006.
	bad2, err := voiceclient.Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	bad2.SendOp(signaling.OpResume, map[string]any{"server_id": strconv.Itoa(guildID), "session_id": "nope", "token": o.Token, "seq_ack": 0})
	if code, _ := bad2.WaitClosed(ctx); code != signaling.CloseSessionInvalid {
		t.Fatalf("resume of an unknown session: close %d, want 4006", code)
	}
}

// TestServerMuteDeaf: the guild's server mute stops a speaker's packets at
// the SFU; server deafen stops a listener receiving; both undo.
func TestServerMuteDeaf(t *testing.T) {
	s := startSFU(t, nil)
	ctx := ctxT(t)
	ua, ub, uc := s.newUser(channelID), s.newUser(channelID), s.newUser(channelID)
	a, b, c := s.connect(ctx, ua, ""), s.connect(ctx, ub, ""), s.connect(ctx, uc, "")
	if !s.srv.SetServerVoiceState(guildID, channelID, snowflake.ID(ua.id), true, false) {
		t.Fatal("user not found")
	}
	_ = a.SendOpus(opus(20))
	s.waitCounter("concord_voice_packets_dropped_total", map[string]string{"reason": "server_muted"}, 1)
	s.srv.SetServerVoiceState(guildID, channelID, snowflake.ID(ua.id), false, false)
	s.srv.SetServerVoiceState(guildID, channelID, snowflake.ID(uc.id), false, true)
	p := opus(21)
	_ = a.SendOpus(p)
	if r, err := b.Recv(time.Now().Add(3 * time.Second)); err != nil || !bytes.Equal(r.Payload, p) {
		t.Fatalf("unmuted speaker not heard: %v", err)
	}
	if r, err := c.Recv(time.Now().Add(300 * time.Millisecond)); err == nil {
		t.Fatalf("deafened listener received %d bytes", len(r.Payload))
	}
	s.waitCounter("concord_voice_packets_forwarded_total", nil, 1) // counted after the send
	if got := s.counter("concord_voice_packets_forwarded_total", nil); got != 1 {
		t.Fatalf("forwarded %v, want 1 (muted packet dropped, deafened listener skipped)", got)
	}
}
