// Package signaling is the wire format of Discord's voice gateway: the JSON
// frames a voice client and an SFU exchange over the signalling WebSocket,
// their opcodes and the close codes the SFU ends a connection with.
//
// Decoding is strict about shape and size (a frame is at most MaxFrame
// bytes; ids are decimal strings) and lenient about unknown fields, which
// clients add over time.
package signaling

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Op is a voice gateway opcode.
type Op int

// Voice gateway opcodes.
const (
	OpIdentify           Op = 0
	OpSelectProtocol     Op = 1
	OpReady              Op = 2
	OpHeartbeat          Op = 3
	OpSessionDescription Op = 4
	OpSpeaking           Op = 5
	OpHeartbeatAck       Op = 6
	OpResume             Op = 7
	OpHello              Op = 8
	OpResumed            Op = 9
	OpClientsConnect     Op = 11
	OpClientConnect      Op = 12
	OpClientDisconnect   Op = 13
	OpMediaSinkWants     Op = 15
	OpVoiceBackend       Op = 16
	// 21–31 are DAVE (end-to-end encryption) transitions and MLS messages.
	OpDaveFirst Op = 21
	OpDaveLast  Op = 31
)

// Close codes the SFU ends a voice gateway connection with.
const (
	CloseUnknownOpcode     = 4001
	CloseDecodeError       = 4002
	CloseNotAuthenticated  = 4003
	CloseAuthFailed        = 4004
	CloseAlreadyAuth       = 4005
	CloseSessionInvalid    = 4006
	CloseSessionTimeout    = 4009
	CloseServerNotFound    = 4011
	CloseUnknownProtocol   = 4012
	CloseDisconnected      = 4014
	CloseServerCrashed     = 4015
	CloseUnknownEncryption = 4016
)

// MaxFrame bounds a client frame. The largest legitimate one is a browser's
// select protocol with its SDP, a few kilobytes.
const MaxFrame = 64 << 10

// Errors from Decode.
var (
	ErrTooLarge = errors.New("signaling: frame too large")
	ErrDecode   = errors.New("signaling: decode error")
)

// Frame is one message: opcode, payload and, on server messages after the
// handshake, a sequence number (v8) the client acknowledges in heartbeats.
type Frame struct {
	Op  Op              `json:"op"`
	D   json.RawMessage `json:"d"`
	Seq int             `json:"seq,omitempty"`
}

// Decode reads a client frame.
func Decode(b []byte) (Frame, error) {
	if len(b) > MaxFrame {
		return Frame{}, ErrTooLarge
	}
	var f struct {
		Op *Op             `json:"op"`
		D  json.RawMessage `json:"d"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return Frame{}, fmt.Errorf("%w: %v", ErrDecode, err)
	}
	if f.Op == nil {
		return Frame{}, fmt.Errorf("%w: no op", ErrDecode)
	}
	return Frame{Op: *f.Op, D: f.D}, nil
}

// Encode writes a server frame.
func Encode(op Op, seq int, d any) ([]byte, error) {
	raw, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("signaling: encode op %d: %w", op, err)
	}
	return json.Marshal(Frame{Op: op, D: raw, Seq: seq})
}

// Snowflake is an id sent as a decimal string (or, leniently, a number).
type Snowflake uint64

// UnmarshalJSON reads "123" or 123.
func (s *Snowflake) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) >= 2 && b[0] == '"' && b[len(b)-1] == '"' {
		b = b[1 : len(b)-1]
	}
	v, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("%w: id %q", ErrDecode, b)
	}
	*s = Snowflake(v)
	return nil
}

// MarshalJSON writes the decimal string form.
func (s Snowflake) MarshalJSON() ([]byte, error) {
	return []byte(`"` + strconv.FormatUint(uint64(s), 10) + `"`), nil
}

// Identify is op 0.
type Identify struct {
	ServerID               Snowflake `json:"server_id"`
	UserID                 Snowflake `json:"user_id"`
	SessionID              string    `json:"session_id"`
	Token                  string    `json:"token"`
	MaxDaveProtocolVersion int       `json:"max_dave_protocol_version"`
	Video                  bool      `json:"video,omitempty"`
}

// Resume is op 7. SeqAck is -1 when the client saw no sequenced message.
type Resume struct {
	ServerID  Snowflake `json:"server_id"`
	SessionID string    `json:"session_id"`
	Token     string    `json:"token"`
	SeqAck    *int      `json:"seq_ack"`
}

// SelectProtocol is op 1: "udp" with the client's discovered address and
// chosen mode, or "webrtc" with the browser's SDP.
type SelectProtocol struct {
	Protocol string          `json:"protocol"`
	Data     json.RawMessage `json:"data"`
	SDP      string          `json:"sdp,omitempty"`
	Codecs   []Codec         `json:"codecs,omitempty"`
}

// UDPData is SelectProtocol.Data for protocol "udp".
type UDPData struct {
	Address string `json:"address"`
	Port    int    `json:"port"`
	Mode    string `json:"mode"`
}

// Codec is a codec a WebRTC client offers.
type Codec struct {
	Name           string `json:"name"`
	Type           string `json:"type"`
	Priority       int    `json:"priority"`
	PayloadType    int    `json:"payload_type"`
	RTXPayloadType int    `json:"rtx_payload_type,omitempty"`
}

// WebRTCSDP returns the offer of a "webrtc" select protocol: data is the SDP
// string itself or an object with an sdp field, and sdp may also sit beside it.
func (p SelectProtocol) WebRTCSDP() (string, error) {
	if p.SDP != "" {
		return p.SDP, nil
	}
	var s string
	if err := json.Unmarshal(p.Data, &s); err == nil && s != "" {
		return s, nil
	}
	var o struct {
		SDP string `json:"sdp"`
	}
	if err := json.Unmarshal(p.Data, &o); err == nil && o.SDP != "" {
		return o.SDP, nil
	}
	return "", fmt.Errorf("%w: webrtc select protocol without sdp", ErrDecode)
}

// Speaking is op 5. Clients send speaking, delay and ssrc; the server
// relays it with user_id so receivers can map the SSRC to a user.
type Speaking struct {
	Speaking int        `json:"speaking"`
	Delay    *int       `json:"delay,omitempty"`
	SSRC     uint32     `json:"ssrc"`
	UserID   *Snowflake `json:"user_id,omitempty"`
}

// HeartbeatV8 is op 3 in v8: the nonce and the last sequence seen. In v4
// the payload is the bare nonce.
type HeartbeatV8 struct {
	T      json.Number `json:"t"`
	SeqAck *int        `json:"seq_ack"`
}

// Heartbeat reads op 3 in either form, returning the nonce to echo and the
// acknowledged sequence (-1 when absent).
func Heartbeat(d json.RawMessage) (nonce json.RawMessage, seqAck int, err error) {
	d = bytes.TrimSpace(d)
	if len(d) == 0 {
		return nil, -1, fmt.Errorf("%w: empty heartbeat", ErrDecode)
	}
	if d[0] == '{' {
		var h HeartbeatV8
		dec := json.NewDecoder(bytes.NewReader(d))
		dec.UseNumber()
		if err := dec.Decode(&h); err != nil {
			return nil, -1, fmt.Errorf("%w: heartbeat: %v", ErrDecode, err)
		}
		ack := -1
		if h.SeqAck != nil {
			ack = *h.SeqAck
		}
		t := json.RawMessage("null")
		if h.T != "" {
			t = json.RawMessage(h.T)
		}
		return t, ack, nil
	}
	var v json.Number
	dec := json.NewDecoder(bytes.NewReader(d))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, -1, fmt.Errorf("%w: heartbeat nonce: %v", ErrDecode, err)
	}
	return json.RawMessage(v), -1, nil
}

// Hello is op 8.
type Hello struct {
	HeartbeatInterval float64 `json:"heartbeat_interval"`
	V                 int     `json:"v,omitempty"`
}

// Ready is op 2.
type Ready struct {
	SSRC              uint32   `json:"ssrc"`
	IP                string   `json:"ip"`
	Port              int      `json:"port"`
	Modes             []string `json:"modes"`
	HeartbeatInterval int      `json:"heartbeat_interval"`
	// ICEServers are the STUN and TURN servers a WebRTC client builds its
	// peer connection with (Concord's addition: Discord's servers need
	// none; the bot libraries ignore the field). A browser behind a NAT
	// or firewall that blocks UDP to the SFU relays through TURN.
	ICEServers []ICEServer `json:"ice_servers,omitempty"`
}

// ICEServer is a browser's RTCIceServer: URLs such as
// "turn:turn.example:3478?transport=udp", with the TURN credentials.
type ICEServer struct {
	URLs       []string `json:"urls"`
	Username   string   `json:"username,omitempty"`
	Credential string   `json:"credential,omitempty"`
}

// SessionDescription is op 4 for "udp". DaveProtocolVersion is always sent
// (0: transport encryption only).
type SessionDescription struct {
	Mode                string `json:"mode"`
	SecretKey           []int  `json:"secret_key"`
	DaveProtocolVersion int    `json:"dave_protocol_version"`
	AudioCodec          string `json:"audio_codec"`
	VideoCodec          string `json:"video_codec,omitempty"`
	MediaSessionID      string `json:"media_session_id"`
}

// SessionDescriptionWebRTC is op 4 for "webrtc": the server's answer SDP.
type SessionDescriptionWebRTC struct {
	SDP                 string `json:"sdp"`
	AudioCodec          string `json:"audio_codec"`
	VideoCodec          string `json:"video_codec"`
	DaveProtocolVersion int    `json:"dave_protocol_version"`
	MediaSessionID      string `json:"media_session_id"`
}

// ClientsConnect is op 11.
type ClientsConnect struct {
	UserIDs []Snowflake `json:"user_ids"`
}

// ClientDisconnect is op 13.
type ClientDisconnect struct {
	UserID Snowflake `json:"user_id"`
}

// KeyInts spells a secret key as the JSON array of byte values clients read.
func KeyInts(key []byte) []int {
	out := make([]int, len(key))
	for i, b := range key {
		out[i] = int(b)
	}
	return out
}

// DecodeInto strictly unmarshals a payload into v.
func DecodeInto(d json.RawMessage, v any) error {
	if len(bytes.TrimSpace(d)) == 0 {
		return fmt.Errorf("%w: missing payload", ErrDecode)
	}
	if err := json.Unmarshal(d, v); err != nil {
		return fmt.Errorf("%w: %v", ErrDecode, err)
	}
	return nil
}

// MaxSinkWants bounds the entries of an op 15 payload: one per stream a
// client could be shown, far more than any call carries.
const MaxSinkWants = 256

// MediaSinkWants is op 15 from a client: the video quality it wants, 0
// (none: pause) to 100 (the best layer), for every stream ("any") and per
// SSRC, as Discord's clients send it: {"any": 100, "12345": 50}. Any is -1
// when the payload does not name it.
type MediaSinkWants struct {
	Any   int
	SSRCs map[uint32]int
}

// DecodeMediaSinkWants reads op 15's payload: a JSON object whose keys are
// "any" or decimal SSRCs and whose values are integer qualities 0–100.
// Other keys are ignored (clients add fields); a quality out of range or
// not an integer, an SSRC key out of range, or more than MaxSinkWants
// entries is a decode error.
func DecodeMediaSinkWants(d json.RawMessage) (MediaSinkWants, error) {
	var raw map[string]json.RawMessage
	if err := DecodeInto(d, &raw); err != nil {
		return MediaSinkWants{}, err
	}
	if len(raw) > MaxSinkWants {
		return MediaSinkWants{}, fmt.Errorf("%w: media sink wants: %d entries (max %d)", ErrDecode, len(raw), MaxSinkWants)
	}
	w := MediaSinkWants{Any: -1, SSRCs: map[uint32]int{}}
	for k, v := range raw {
		isAny := k == "any"
		ssrc, err := strconv.ParseUint(k, 10, 32)
		if !isAny && err != nil {
			continue
		}
		var qp *int
		if err := json.Unmarshal(v, &qp); err != nil || qp == nil || *qp < 0 || *qp > 100 {
			return MediaSinkWants{}, fmt.Errorf("%w: media sink wants: quality of %q is %s, want an integer 0-100", ErrDecode, k, v)
		}
		q := *qp
		if isAny {
			w.Any = q
		} else {
			w.SSRCs[uint32(ssrc)] = q
		}
	}
	return w, nil
}
