package gateway

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
)

func TestMessageSent(t *testing.T) {
	at := time.UnixMilli(1_780_000_000_123)
	id := snowflake.Compose(at, 1, 1, 7)
	payload := []byte(`{"id":"` + id.String() + `","channel_id":"1"}`)
	if got := messageSent("MESSAGE_CREATE", payload); got != at.UnixMilli() {
		t.Fatalf("messageSent(MESSAGE_CREATE) = %d, want %d", got, at.UnixMilli())
	}
	for _, c := range []struct {
		typ string
		d   string
	}{
		{"MESSAGE_UPDATE", string(payload)},
		{"MESSAGE_CREATE", `{"channel_id":"1","id":"` + id.String() + `"}`},
		{"MESSAGE_CREATE", `{"id":"not-a-number"}`},
		{"MESSAGE_CREATE", `{"id":"`},
	} {
		if got := messageSent(c.typ, []byte(c.d)); got != 0 {
			t.Errorf("messageSent(%s, %s) = %d, want 0", c.typ, c.d, got)
		}
	}
}

// A MESSAGE_CREATE written to a session is observed once in
// concord_gateway_delivery_age_seconds, its bytes counted under its event
// name; another event adds bytes under its own name and no age.
func TestDeliveryMetrics(t *testing.T) {
	g := newTestGateway(t, Config{})
	c := g.dial(t, "")
	r := c.identify("tok-alice")
	sid := event.SessionID(r.SessionID)
	m := g.node.metrics
	id := snowflake.Compose(time.Now().Add(-30*time.Millisecond), 1, 1, 1)
	g.deliver("MESSAGE_CREATE", `{"id":"`+id.String()+`","content":"hi"}`, sid)
	f := readUntil(c, "MESSAGE_CREATE")
	g.deliver("TYPING_START", `{"user_id":"1"}`, sid)
	readUntil(c, "TYPING_START")
	var h dto.Metric
	if err := m.deliveryAge.Write(&h); err != nil {
		t.Fatal(err)
	}
	if n, sum := h.GetHistogram().GetSampleCount(), h.GetHistogram().GetSampleSum(); n != 1 || sum < 0.03 || sum > 10 {
		t.Errorf("delivery age: %d observations summing %v s, want one of at least the message's 30 ms age", n, sum)
	}
	if got := testutil.ToFloat64(m.sentBytes.WithLabelValues("MESSAGE_CREATE")); got < float64(len(f.D)) {
		t.Errorf("MESSAGE_CREATE bytes %v, want at least its payload's %d", got, len(f.D))
	}
	if got := testutil.ToFloat64(m.sentBytes.WithLabelValues("TYPING_START")); got == 0 {
		t.Error("TYPING_START bytes not counted")
	}
}

// readUntil reads frames until a dispatch of type typ.
func readUntil(c *client, typ string) wireFrame {
	for {
		if f := c.read(); f.T != nil && *f.T == typ {
			return f
		}
	}
}
