package signaling

import (
	"encoding/json"
	"strconv"
	"testing"
)

func TestDecode(t *testing.T) {
	f, err := Decode([]byte(`{"op":0,"d":{"server_id":"1","user_id":2,"session_id":"s","token":"t","max_dave_protocol_version":1}}`))
	if err != nil || f.Op != OpIdentify {
		t.Fatalf("decode: %+v %v", f, err)
	}
	var id Identify
	if err := DecodeInto(f.D, &id); err != nil || id.ServerID != 1 || id.UserID != 2 || id.MaxDaveProtocolVersion != 1 {
		t.Fatalf("identify: %+v %v", id, err)
	}
	for _, bad := range []string{``, `{}`, `{"op":"x"}`, `[1]`, `{"op":1`} {
		if _, err := Decode([]byte(bad)); err == nil {
			t.Errorf("%q decoded", bad)
		}
	}
	n, ack, err := Heartbeat(json.RawMessage(`{"t":1700000000000,"seq_ack":5}`))
	if err != nil || string(n) != "1700000000000" || ack != 5 {
		t.Fatalf("v8 heartbeat: %s %d %v", n, ack, err)
	}
	n, ack, err = Heartbeat(json.RawMessage(`42`))
	if err != nil || string(n) != "42" || ack != -1 {
		t.Fatalf("v4 heartbeat: %s %d %v", n, ack, err)
	}
	sp := SelectProtocol{Data: json.RawMessage(`"v=0"`)}
	if s, err := sp.WebRTCSDP(); err != nil || s != "v=0" {
		t.Fatalf("sdp from data string: %q %v", s, err)
	}
	b, _ := Encode(OpSpeaking, 3, Speaking{Speaking: 1, SSRC: 9})
	if string(b) != `{"op":5,"d":{"speaking":1,"ssrc":9},"seq":3}` {
		t.Fatalf("encode: %s", b)
	}
}

func TestDecodeMediaSinkWants(t *testing.T) {
	w, err := DecodeMediaSinkWants(json.RawMessage(`{"any":100,"12345":50,"pixelCounts":{"12345":921600},"streams":[]}`))
	if err != nil || w.Any != 100 || len(w.SSRCs) != 1 || w.SSRCs[12345] != 50 {
		t.Fatalf("wants: %+v %v", w, err)
	}
	if w, err := DecodeMediaSinkWants(json.RawMessage(`{"7":0}`)); err != nil || w.Any != -1 || w.SSRCs[7] != 0 {
		t.Fatalf("wants without any: %+v %v", w, err)
	}
	for _, bad := range []string{``, `[]`, `"any"`, `{"any":101}`, `{"any":-1}`, `{"any":50.5}`, `{"1":"high"}`, `{"any":null}`} {
		if _, err := DecodeMediaSinkWants(json.RawMessage(bad)); err == nil {
			t.Errorf("%s decoded", bad)
		}
	}
	big := map[string]int{}
	for i := 0; i <= MaxSinkWants; i++ {
		big[strconv.Itoa(i)] = 1
	}
	b, _ := json.Marshal(big)
	if _, err := DecodeMediaSinkWants(b); err == nil {
		t.Errorf("%d entries decoded", len(big))
	}
}

// FuzzClientFrame runs every decoder a client frame can reach on the SFU.
func FuzzClientFrame(f *testing.F) {
	for _, s := range []string{
		`{"op":0,"d":{"server_id":"1","user_id":"2","session_id":"s","token":"t","max_dave_protocol_version":1}}`,
		`{"op":1,"d":{"protocol":"udp","data":{"address":"1.2.3.4","port":5,"mode":"aead_xchacha20_poly1305_rtpsize"}}}`,
		`{"op":1,"d":{"protocol":"webrtc","data":"v=0\r\n","sdp":"v=0","codecs":[{"name":"opus","type":"audio","priority":1000,"payload_type":111}]}}`,
		`{"op":3,"d":{"t":1,"seq_ack":-1}}`, `{"op":3,"d":1234}`,
		`{"op":5,"d":{"speaking":1,"delay":0,"ssrc":1}}`,
		`{"op":7,"d":{"server_id":"1","session_id":"s","token":"t","seq_ack":3}}`,
		`{"op":15,"d":{"any":100,"12345":50}}`, `{"op":15,"d":{"any":0,"pixelCounts":{"1":2}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := Decode(b)
		if err != nil {
			return
		}
		switch fr.Op {
		case OpIdentify:
			var v Identify
			_ = DecodeInto(fr.D, &v)
		case OpSelectProtocol:
			var v SelectProtocol
			if DecodeInto(fr.D, &v) == nil {
				var u UDPData
				_ = DecodeInto(v.Data, &u)
				_, _ = v.WebRTCSDP()
			}
		case OpHeartbeat:
			n, _, err := Heartbeat(fr.D)
			if err == nil {
				// The nonce is echoed inside the ack: it must stay valid JSON.
				if _, err := Encode(OpHeartbeatAck, 0, n); err != nil {
					t.Fatalf("echoed nonce %q is not JSON: %v", n, err)
				}
			}
		case OpSpeaking:
			var v Speaking
			_ = DecodeInto(fr.D, &v)
		case OpResume:
			var v Resume
			_ = DecodeInto(fr.D, &v)
		case OpMediaSinkWants:
			w, err := DecodeMediaSinkWants(fr.D)
			if err != nil {
				return
			}
			if w.Any < -1 || w.Any > 100 || len(w.SSRCs) > MaxSinkWants {
				t.Fatalf("wants out of range: %+v", w)
			}
			for _, q := range w.SSRCs {
				if q < 0 || q > 100 {
					t.Fatalf("quality %d out of range", q)
				}
			}
		}
	})
}
