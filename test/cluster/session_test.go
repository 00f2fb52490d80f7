package cluster

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/concord-chat/concord/internal/gwtest"
)

// dispatch is one op 0 frame a session received.
type dispatch = gwtest.Frame

// wsSession is a real gateway client (the shared internal/gwtest
// one) bound to the gateway node it dialled.
type wsSession struct {
	*gwtest.Conn
	name    string
	gateway string
}

// dial connects a session to a gateway node and identifies with token
// (intents GUILDS, GUILD_MESSAGES and MESSAGE_CONTENT).
func dial(t *testing.T, name, gatewayAddr, token string) *wsSession {
	t.Helper()
	return dialIntents(t, name, gatewayAddr, token, gwtest.DefaultIntents)
}

// dialIntents is dial with the given intents.
func dialIntents(t *testing.T, name, gatewayAddr, token string, intents uint64) *wsSession {
	t.Helper()
	c, err := gwtest.Dial(gwtest.URL(gatewayAddr), token, gwtest.Options{Name: name, Intents: intents})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &wsSession{Conn: c, name: name, gateway: gatewayAddr}
}

func (s *wsSession) send(t *testing.T, v any) {
	if err := s.Send(v); err != nil {
		t.Fatal(err)
	}
}

// await waits until cond holds on the frames received, failing the test
// when the connection ends first or the timeout passes.
func (s *wsSession) await(t *testing.T, what string, timeout time.Duration, cond func(frames []dispatch) bool) {
	t.Helper()
	if err := s.Await(what, timeout, cond); err != nil {
		t.Fatal(err)
	}
}

// snapshot returns a copy of the frames received so far.
func (s *wsSession) snapshot() []dispatch { return s.Frames() }

// guildCreates returns the arrival times of GUILD_CREATE for guild id.
func guildCreates(frames []dispatch, id string) []time.Time {
	var out []time.Time
	for _, f := range frames {
		if f.Type != "GUILD_CREATE" {
			continue
		}
		var g struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(f.D, &g) == nil && g.ID == id {
			out = append(out, f.At)
		}
	}
	return out
}

// message is the part of MESSAGE_CREATE the test checks.
type message struct {
	ID        string `json:"id"`
	ChannelID string `json:"channel_id"`
	Content   string `json:"content"`
}

// messages returns the MESSAGE_CREATEs in arrival order.
func messages(frames []dispatch) []message {
	var out []message
	for _, f := range frames {
		if f.Type != "MESSAGE_CREATE" {
			continue
		}
		var m message
		if json.Unmarshal(f.D, &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// checkSeq reports the first gap or repeat in a session's sequence
// numbers, which must run 1, 2, 3, ...
func checkSeq(frames []dispatch) error {
	for i, f := range frames {
		if f.Seq != int64(i+1) {
			return fmt.Errorf("dispatch %d (%s) has seq %d, want %d", i, f.Type, f.Seq, i+1)
		}
	}
	return nil
}
