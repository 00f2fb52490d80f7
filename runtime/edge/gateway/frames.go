package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Gateway opcodes.
const (
	OpDispatch                = 0
	OpHeartbeat               = 1
	OpIdentify                = 2
	OpPresenceUpdate          = 3
	OpVoiceStateUpdate        = 4
	OpResume                  = 6
	OpReconnect               = 7
	OpRequestGuildMembers     = 8
	OpInvalidSession          = 9
	OpHello                   = 10
	OpHeartbeatACK            = 11
	OpLazyRequest             = 14
	OpRequestSoundboardSounds = 31
)

// Close codes the node sends, as Discord documents them.
const (
	CloseUnknownError         = 4000
	CloseUnknownOpcode        = 4001
	CloseDecodeError          = 4002
	CloseNotAuthenticated     = 4003
	CloseAuthenticationFailed = 4004
	CloseAlreadyAuthenticated = 4005
	CloseInvalidSeq           = 4007
	CloseRateLimited          = 4008
	CloseSessionTimedOut      = 4009
	CloseInvalidShard         = 4010
	CloseShardingRequired     = 4011
	CloseInvalidAPIVersion    = 4012
	CloseInvalidIntents       = 4013
	CloseDisallowedIntents    = 4014
)

// KnownIntents holds every intent bit Discord documents; IDENTIFY with any
// other bit is closed with 4013.
const KnownIntents uint64 = 1<<17 - 1 | 1<<20 | 1<<21 | 1<<24 | 1<<25

// clientFrame is a decoded client payload: its opcode and raw `d`.
type clientFrame struct {
	Op int
	D  json.RawMessage
}

// decodeFrame parses one client payload. A payload that is not a JSON
// object with an integer "op" wraps ErrDecode; an opcode clients may not
// send wraps ErrUnknownOpcode. For opcodes with an object body, `d` must be
// a JSON object (heartbeat's `d` is a number or null).
func decodeFrame(b []byte) (clientFrame, error) {
	var raw struct {
		Op *json.RawMessage `json:"op"`
		D  json.RawMessage  `json:"d"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return clientFrame{}, fmt.Errorf("%w: %v", ErrDecode, err)
	}
	if raw.Op == nil {
		return clientFrame{}, fmt.Errorf("%w: missing op", ErrDecode)
	}
	op, err := strconv.Atoi(string(*raw.Op))
	if err != nil {
		return clientFrame{}, fmt.Errorf("%w: op %.20q is not an integer", ErrDecode, *raw.Op)
	}
	f := clientFrame{Op: op, D: raw.D}
	switch op {
	case OpHeartbeat:
		d := bytes.TrimSpace(f.D)
		if len(d) == 0 || string(d) == "null" {
			return f, nil
		}
		if _, err := strconv.ParseInt(string(d), 10, 64); err != nil {
			return clientFrame{}, fmt.Errorf("%w: heartbeat d %.20q is not a sequence", ErrDecode, d)
		}
		return f, nil
	case OpIdentify, OpResume, OpPresenceUpdate, OpVoiceStateUpdate, OpRequestGuildMembers, OpLazyRequest, OpRequestSoundboardSounds:
		if !isObject(f.D) {
			return clientFrame{}, fmt.Errorf("%w: op %d needs an object d", ErrDecode, op)
		}
		return f, nil
	default:
		return clientFrame{}, fmt.Errorf("%w: %d", ErrUnknownOpcode, op)
	}
}

// isObject reports whether b is a JSON object (already known to be valid JSON).
func isObject(b json.RawMessage) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{'
}

// identify is IDENTIFY's `d`.
type identify struct {
	Token          string
	Intents        uint64
	HasShard       bool
	ShardID        int
	ShardCount     int
	LargeThreshold int
	Compress       bool
	OS             string
	Browser        string
	// Presence is IDENTIFY's `presence` when it is a JSON object.
	Presence json.RawMessage
}

// decodeIdentify parses IDENTIFY's `d` leniently: properties with or
// without "$", intents as a number or numeric string, any presence.
func decodeIdentify(d json.RawMessage) (identify, error) {
	var raw struct {
		Token          *string           `json:"token"`
		Intents        json.RawMessage   `json:"intents"`
		Shard          []json.RawMessage `json:"shard"`
		LargeThreshold json.RawMessage   `json:"large_threshold"`
		Compress       json.RawMessage   `json:"compress"`
		Properties     map[string]any    `json:"properties"`
		Presence       json.RawMessage   `json:"presence"`
	}
	if err := json.Unmarshal(d, &raw); err != nil {
		return identify{}, fmt.Errorf("%w: identify: %v", ErrDecode, err)
	}
	if raw.Token == nil {
		return identify{}, fmt.Errorf("%w: identify without token", ErrDecode)
	}
	id := identify{Token: strings.TrimPrefix(*raw.Token, "Bot ")}
	if n, ok := jsonUint(raw.Intents); ok {
		id.Intents = n
	} else if len(raw.Intents) > 0 && string(raw.Intents) != "null" {
		return identify{}, fmt.Errorf("%w: intents %.30q", ErrInvalidIntents, raw.Intents)
	}
	if raw.Shard != nil {
		if len(raw.Shard) != 2 {
			return identify{}, fmt.Errorf("%w: shard needs [id, count]", ErrInvalidShard)
		}
		sid, ok1 := jsonUint(raw.Shard[0])
		cnt, ok2 := jsonUint(raw.Shard[1])
		if !ok1 || !ok2 || cnt < 1 || sid >= cnt || cnt > 1<<20 {
			return identify{}, fmt.Errorf("%w: shard [%s, %s]", ErrInvalidShard, raw.Shard[0], raw.Shard[1])
		}
		id.HasShard, id.ShardID, id.ShardCount = true, int(sid), int(cnt)
	}
	id.LargeThreshold = 50
	if n, ok := jsonUint(raw.LargeThreshold); ok {
		id.LargeThreshold = int(min(max(n, 50), 250))
	}
	id.Compress = string(bytes.TrimSpace(raw.Compress)) == "true"
	if isObject(raw.Presence) {
		id.Presence = raw.Presence
	}
	id.OS = propString(raw.Properties, "os")
	id.Browser = propString(raw.Properties, "browser")
	return id, nil
}

// propString reads an IDENTIFY property named key or "$"+key.
func propString(p map[string]any, key string) string {
	for _, k := range []string{key, "$" + key} {
		if s, ok := p[k].(string); ok {
			return s
		}
	}
	return ""
}

// jsonUint reads a non-negative integer given as a JSON number or string.
func jsonUint(b json.RawMessage) (uint64, bool) {
	s := string(bytes.TrimSpace(b))
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	if s == "" {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

// resume is RESUME's `d`.
type resume struct {
	Token     string
	SessionID string
	Seq       int64
}

// decodeResume parses RESUME's `d`; seq may be a number, string or null.
func decodeResume(d json.RawMessage) (resume, error) {
	var raw struct {
		Token     *string         `json:"token"`
		SessionID *string         `json:"session_id"`
		Seq       json.RawMessage `json:"seq"`
	}
	if err := json.Unmarshal(d, &raw); err != nil {
		return resume{}, fmt.Errorf("%w: resume: %v", ErrDecode, err)
	}
	if raw.Token == nil || raw.SessionID == nil {
		return resume{}, fmt.Errorf("%w: resume needs token and session_id", ErrDecode)
	}
	r := resume{Token: strings.TrimPrefix(*raw.Token, "Bot "), SessionID: *raw.SessionID}
	if n, ok := jsonUint(raw.Seq); ok {
		if n > 1<<62 {
			return resume{}, fmt.Errorf("%w: resume seq out of range", ErrDecode)
		}
		r.Seq = int64(n)
	} else if len(raw.Seq) > 0 && string(raw.Seq) != "null" {
		return resume{}, fmt.Errorf("%w: resume seq %.30q", ErrDecode, raw.Seq)
	}
	return r, nil
}

// appendDispatch appends the op 0 frame {"t":T,"s":S,"op":0,"d":D} to dst.
// t must be a plain event name (no characters that need JSON escaping).
func appendDispatch(dst []byte, t string, seq int64, d []byte) []byte {
	dst = appendDispatchHead(dst, t, seq)
	if len(d) == 0 {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, d...)
	}
	return append(dst, '}')
}

// appendDispatchHead appends a dispatch's envelope up to its `d` value:
// the per-session part, written before the shared payload.
func appendDispatchHead(dst []byte, t string, seq int64) []byte {
	dst = append(dst, `{"t":"`...)
	dst = append(dst, t...)
	dst = append(dst, `","s":`...)
	dst = strconv.AppendInt(dst, seq, 10)
	return append(dst, `,"op":0,"d":`...)
}

// dispatchSize is len(appendDispatch(nil, t, seq, d)) without building it.
func dispatchSize(t string, seq int64, d []byte) int {
	n := len(`{"t":"","s":,"op":0,"d":}`) + len(t) + len(d) + digits(seq)
	if len(d) == 0 {
		n += 4
	}
	return n
}

func digits(v int64) int {
	n := 1
	for v >= 10 {
		v /= 10
		n++
	}
	return n
}

// controlFrame builds a non-dispatch frame {"t":null,"s":null,"op":OP,"d":D}.
func controlFrame(op int, d string) []byte {
	b := make([]byte, 0, 40+len(d))
	b = append(b, `{"t":null,"s":null,"op":`...)
	b = strconv.AppendInt(b, int64(op), 10)
	b = append(b, `,"d":`...)
	b = append(b, d...)
	return append(b, '}')
}

// validEventName reports whether t can be written into a frame unescaped.
func validEventName(t string) bool {
	if t == "" {
		return false
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c >= 'a' && c <= 'z') {
			return false
		}
	}
	return true
}
