package gateway

import (
	"bytes"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// messageIDPrefix is how every MESSAGE_CREATE payload begins: wire.Message
// encodes its id first.
var messageIDPrefix = []byte(`{"id":"`)

// messageSent returns when the message of a MESSAGE_CREATE payload was
// created, in Unix milliseconds, read from the snowflake id the payload
// starts with; 0 for other events or a payload of another shape. It reads
// a prefix only, once per batch, so the hot path parses no JSON.
func messageSent(typ string, d []byte) int64 {
	if typ != "MESSAGE_CREATE" || !bytes.HasPrefix(d, messageIDPrefix) {
		return 0
	}
	rest := d[len(messageIDPrefix):]
	end := bytes.IndexByte(rest, '"')
	if end <= 0 || end > 20 {
		return 0
	}
	id, err := snowflake.Parse(string(rest[:end]))
	if err != nil {
		return 0
	}
	return id.Time().UnixMilli()
}

// observeDelivered records the send-to-socket latency of b, written to a
// socket at Unix nanoseconds at, when b is a message. m is nil in tests
// that build nodes without metrics.
func (m *metrics) observeDelivered(b *body, at int64) {
	if m == nil || b == nil || b.sent == 0 {
		return
	}
	age := at/int64(time.Millisecond) - b.sent
	if age < 0 {
		// Clocks of the API node and this one disagree; a negative age
		// says nothing about latency.
		age = 0
	}
	m.deliveryAge.Observe(float64(age) / 1000)
}
