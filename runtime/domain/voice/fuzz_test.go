package voice

import (
	"bytes"
	"crypto/ed25519"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"testing"

	"github.com/concord-chat/concord/runtime/domain/voice/discovery"
	"github.com/concord-chat/concord/runtime/domain/voice/rtpsize"
)

// fuzzRig is a server with one call of two bound participants whose
// listener address is a local socket, driven without its read loop.
type fuzzRig struct {
	srv          *Server
	w            *forwarder
	a, b         *participant
	aAddr        netip.AddrPort
	sink         *net.UDPConn
	aCipher      *rtpsize.Cipher
	strangerAddr netip.AddrPort
}

func newFuzzRig(t testing.TB) *fuzzRig {
	pub, _, _ := ed25519.GenerateKey(nil)
	srv, err := New(Config{ID: "fuzz", UDPAddr: "127.0.0.1:0", Readers: 1, TrustedKeys: []ed25519.PublicKey{pub},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.md.close)
	sink, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sink.Close() })
	r := &fuzzRig{srv: srv, sink: sink}
	r.w = newForwarder(srv, srv.md.conns[0])
	k := callKey{1, 2}
	key := bytes.Repeat([]byte{9}, 32)
	for i, pp := range []**participant{&r.a, &r.b} {
		p := &participant{userID: 10 + 1, ssrc: uint32(100 + i)}
		c, _ := rtpsize.New(rtpsize.ModeXChaCha20, key)
		p.cipher.Store(c)
		srv.join(p, k)
		srv.md.bind(p, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(40000+i)))
		*pp = p
	}
	// B's listener address is the sink socket, so forwarded packets can be read.
	srv.md.bind(r.b, sink.LocalAddr().(*net.UDPAddr).AddrPort())
	r.aAddr = *r.a.addr.Load()
	r.aCipher = r.a.cipher.Load()
	r.strangerAddr = netip.MustParseAddrPort("127.0.0.1:40999")
	return r
}

func (r *fuzzRig) seal(payload []byte, counter uint32) []byte {
	h := make([]byte, 12)
	h[0], h[1] = 0x80, 0x78
	binary.BigEndian.PutUint32(h[8:], r.a.ssrc)
	return r.aCipher.Seal(nil, h, payload, counter)
}

// FuzzDatagram feeds arbitrary datagrams into the UDP path from a bound and
// an unbound address: nothing panics, and a packet is forwarded only if it
// authenticates with the sender's key.
func FuzzDatagram(f *testing.F) {
	rig := newFuzzRig(f)
	f.Add(true, rig.seal([]byte("opus"), 1))
	f.Add(true, discovery.AppendRequest(nil, 100))
	f.Add(false, rig.seal([]byte("opus"), 2))
	f.Add(true, make([]byte, 8))
	f.Add(true, []byte{0x90, 0x78, 0, 1, 0, 0, 0, 0, 0, 0, 0, 100, 0xbe, 0xde, 0, 1})
	f.Fuzz(func(t *testing.T, bound bool, pkt []byte) {
		from := rig.strangerAddr
		if bound {
			from = rig.aAddr
		}
		wasCandidate := rig.a.candidate.Load() != nil && *rig.a.candidate.Load() == from
		before := counterValue(rig.srv.m.packetsForwarded)
		rig.w.handle(pkt, from)
		if counterValue(rig.srv.m.packetsForwarded) > before {
			// From the unbound address only after IP discovery named it a
			// candidate (a NAT rebinding), and in both cases only if the
			// packet authenticates.
			if !bound && !wasCandidate {
				t.Fatalf("forwarded from an address that never did IP discovery: % x", pkt)
			}
			if _, _, _, err := rig.aCipher.Open(nil, pkt); err != nil {
				t.Fatalf("forwarded a packet that does not authenticate (bound=%v): % x", bound, pkt)
			}
		}
		// Keep A bound where the rig expects it (a valid packet from a
		// candidate address could have moved it).
		if a := rig.a.addr.Load(); a == nil || *a != rig.aAddr {
			rig.srv.md.bind(rig.a, rig.aAddr)
		}
	})
}

func TestForwardReachesListener(t *testing.T) {
	rig := newFuzzRig(t)
	rig.w.handle(rig.seal([]byte("hello opus"), 1), rig.aAddr)
	buf := make([]byte, 1500)
	n, err := rig.sink.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	plain, _, _, err := rig.b.cipher.Load().Open(nil, buf[:n])
	if err != nil || string(plain) != "hello opus" {
		t.Fatalf("listener got %q, %v", plain, err)
	}
}
