package discovery

import (
	"bytes"
	"net/netip"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	req := AppendRequest(nil, 0xdeadbeef)
	if len(req) != Size || !IsRequest(req) {
		t.Fatalf("request % x", req)
	}
	ssrc, err := ParseRequest(req)
	if err != nil || ssrc != 0xdeadbeef {
		t.Fatalf("ParseRequest = %x, %v", ssrc, err)
	}
	at := netip.MustParseAddrPort("[::ffff:203.0.113.7]:50000")
	resp, err := AppendResponse(nil, ssrc, at)
	if err != nil || len(resp) != Size {
		t.Fatalf("response %d bytes, %v", len(resp), err)
	}
	// Exactly the bytes clients index: type 2 at [0:2], length 70, ssrc, ASCII ip, port last.
	if !bytes.Equal(resp[:8], []byte{0, 2, 0, 70, 0xde, 0xad, 0xbe, 0xef}) || string(resp[8:19]) != "203.0.113.7" || resp[19] != 0 {
		t.Fatalf("response % x", resp)
	}
	s2, ap, err := ParseResponse(resp)
	if err != nil || s2 != ssrc || ap != netip.MustParseAddrPort("203.0.113.7:50000") {
		t.Fatalf("ParseResponse = %x %v %v", s2, ap, err)
	}
	if _, err := AppendResponse(nil, 1, netip.MustParseAddrPort("[2001:db8::1]:1")); err == nil {
		t.Fatal("IPv6 response accepted")
	}
}

func TestRejects(t *testing.T) {
	bad := AppendRequest(nil, 1)
	bad[3] = 71
	for name, p := range map[string][]byte{"length field": bad, "short": make([]byte, 73), "rtp": append([]byte{0x80}, make([]byte, 73)...)} {
		if _, err := ParseRequest(p); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add(AppendRequest(nil, 5))
	r, _ := AppendResponse(nil, 5, netip.MustParseAddrPort("127.0.0.1:9"))
	f.Add(r)
	f.Fuzz(func(t *testing.T, p []byte) {
		if ssrc, err := ParseRequest(p); err == nil && !bytes.Equal(p[:8], AppendRequest(nil, ssrc)[:8]) {
			t.Fatalf("request parsed inconsistently")
		}
		if ssrc, ap, err := ParseResponse(p); err == nil {
			if _, err := AppendResponse(nil, ssrc, ap); err != nil {
				t.Fatalf("parsed response does not re-encode: %v", err)
			}
		}
	})
}
