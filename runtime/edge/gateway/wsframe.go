package gateway

import "encoding/binary"

// WebSocket opcodes the node writes itself (RFC 6455 §5.2). The node uses
// gorilla/websocket for the handshake and for reading, and writes its own
// server frames (unmasked) so that a dispatch can go straight to the
// socket with one non-blocking write.
const (
	wsText   byte = 0x1
	wsBinary byte = 0x2
	wsClose  byte = 0x8
	wsPong   byte = 0xA
)

// appendFrameHeader appends a final, unmasked frame header for a payload
// of n bytes.
func appendFrameHeader(dst []byte, op byte, n int) []byte {
	dst = append(dst, 0x80|op)
	switch {
	case n < 126:
		return append(dst, byte(n))
	case n <= 0xFFFF:
		dst = append(dst, 126)
		return binary.BigEndian.AppendUint16(dst, uint16(n))
	default:
		dst = append(dst, 127)
		return binary.BigEndian.AppendUint64(dst, uint64(n))
	}
}

// closePayload is a close frame's body: the code and a reason trimmed to
// fit the 125-byte control frame limit. Code 1005 (no status) has no body.
func closePayload(code int, reason string) []byte {
	if code == 1005 {
		return nil
	}
	if len(reason) > 123 {
		reason = reason[:123]
	}
	b := binary.BigEndian.AppendUint16(make([]byte, 0, 2+len(reason)), uint16(code))
	return append(b, reason...)
}
