package gateway

import (
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/snowflake"
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
