package voice

import (
	"crypto/ed25519"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"testing"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/voice/rtpsize"
)

// BenchmarkForward measures the UDP path in-process: one speaker's packet
// opened, checked and sealed for each listener, sent with sendmmsg to a
// discarding socket. ns/op divided by the listeners is the cost of one
// forwarded packet without any client in the same process.
func BenchmarkForward(b *testing.B) {
	for _, listeners := range []int{4, 500} {
		for _, mode := range rtpsize.Modes {
			b.Run(strconv.Itoa(listeners)+"/"+mode, func(b *testing.B) {
				pub, _, _ := ed25519.GenerateKey(nil)
				srv, err := New(Config{ID: "bench", UDPAddr: "127.0.0.1:0", Readers: 1, TrustedKeys: []ed25519.PublicKey{pub},
					Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), MaxParticipants: 1000})
				if err != nil {
					b.Fatal(err)
				}
				defer srv.md.close()
				sink, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
				if err != nil {
					b.Fatal(err)
				}
				defer sink.Close()
				_ = sink.SetReadBuffer(1 << 20)
				go func() { // drain, so the sink's queue never fills
					buf := make([]byte, 2048)
					for {
						if _, err := sink.Read(buf); err != nil {
							return
						}
					}
				}()
				sinkAddr := sink.LocalAddr().(*net.UDPAddr).AddrPort()
				key := make([]byte, 32)
				k := callKey{1, 2}
				var speaker *participant
				for i := 0; i <= listeners; i++ {
					p := &participant{userID: snowflake.ID(10 + i), ssrc: uint32(100 + i)}
					c, _ := rtpsize.New(mode, key)
					p.cipher.Store(c)
					srv.join(p, k)
					if i == 0 {
						speaker = p
						srv.md.bind(p, netip.MustParseAddrPort("127.0.0.1:40000"))
						continue
					}
					// Every listener's packets go to the one sink (a different
					// address each would need a socket each).
					p.udpAddr.Store(net.UDPAddrFromAddrPort(sinkAddr))
				}
				w := newForwarder(srv, srv.md.conns[0])
				c := speaker.cipher.Load()
				hdr := make([]byte, 12)
				hdr[0], hdr[1] = 0x80, 0x78
				binary.BigEndian.PutUint32(hdr[8:], speaker.ssrc)
				payload := make([]byte, 120)
				from := *speaker.addr.Load()
				pkts := make([][]byte, 1024)
				for i := range pkts {
					binary.BigEndian.PutUint16(hdr[2:], uint16(i))
					pkts[i] = c.Seal(nil, hdr, payload, uint32(i+1))
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if i%len(pkts) == 0 && i > 0 {
						speaker.replay = rtpsize.ReplayWindow{} // reuse the sealed packets
					}
					w.handle(pkts[i%len(pkts)], from)
				}
				b.StopTimer()
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(listeners), "ns/forwarded")
			})
		}
	}
}
