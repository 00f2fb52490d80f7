package voice

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"sync"

	"golang.org/x/net/ipv4"

	"github.com/concord-chat/concord/runtime/domain/voice/discovery"
	"github.com/concord-chat/concord/runtime/domain/voice/rtpsize"
)

// media is the UDP side: who is bound at which address, and the socket.
type media struct {
	conns []*net.UDPConn
	m     *metrics

	mu    sync.RWMutex
	addrs map[netip.AddrPort]*participant
	ssrcs map[uint32]*participant
}

func (md *media) close() {
	for _, c := range md.conns {
		c.Close()
	}
}

func (md *media) bySSRC(ssrc uint32) *participant {
	md.mu.RLock()
	defer md.mu.RUnlock()
	return md.ssrcs[ssrc]
}

func (md *media) byAddr(a netip.AddrPort) *participant {
	md.mu.RLock()
	defer md.mu.RUnlock()
	return md.addrs[a]
}

// register makes p findable by its SSRC (for IP discovery).
func (md *media) register(p *participant) {
	md.mu.Lock()
	md.ssrcs[p.ssrc] = p
	md.mu.Unlock()
}

// unregister forgets p's SSRC and address.
func (md *media) unregister(p *participant) {
	md.mu.Lock()
	defer md.mu.Unlock()
	if md.ssrcs[p.ssrc] == p {
		delete(md.ssrcs, p.ssrc)
	}
	if a := p.addr.Load(); a != nil && md.addrs[*a] == p {
		delete(md.addrs, *a)
	}
}

// bind points addr at p, replacing p's previous address.
func (md *media) bind(p *participant, addr netip.AddrPort) {
	md.mu.Lock()
	defer md.mu.Unlock()
	if old := md.addrs[addr]; old != nil && old != p {
		// Another session held this address (a client that reconnected
		// with a new session from the same socket): the newest wins.
		old.addr.Store(nil)
		old.udpAddr.Store(nil)
	}
	if prev := p.addr.Load(); prev != nil && md.addrs[*prev] == p {
		delete(md.addrs, *prev)
	}
	md.addrs[addr] = p
	p.udpAddr.Store(net.UDPAddrFromAddrPort(addr))
	p.addr.Store(&addr)
}

// batchSize is how many sealed packets one sendmmsg call carries.
const batchSize = 64

// forwarder is one UDP reader goroutine's scratch state.
type forwarder struct {
	md    *media
	conn  *net.UDPConn
	srv   *Server
	in    []byte
	plain []byte
	out   []byte

	// A fan-out is sealed into bufs and sent with one sendmmsg per
	// batchSize listeners: at a few hundred listeners per speaker the
	// syscall per packet, not the crypto, is the cost.
	pc     *ipv4.PacketConn
	bufs   [batchSize][]byte
	msgs   [batchSize]ipv4.Message
	queued int
}

func newForwarder(s *Server, conn *net.UDPConn) *forwarder {
	w := &forwarder{md: s.md, conn: conn, srv: s, in: make([]byte, rtpsize.MaxPacket+1),
		plain: make([]byte, 0, rtpsize.MaxPacket), out: make([]byte, 0, rtpsize.MaxPacket+64), pc: ipv4.NewPacketConn(conn)}
	for i := range w.bufs {
		w.bufs[i] = make([]byte, 0, rtpsize.MaxPacket+64)
		w.msgs[i].Buffers = make([][]byte, 1)
	}
	return w
}

// slot returns the next batch buffer to seal into.
func (w *forwarder) slot() []byte { return w.bufs[w.queued][:0] }

// enqueue queues the packet sealed into slot() for to, flushing a full batch.
func (w *forwarder) enqueue(b []byte, to *net.UDPAddr) {
	w.bufs[w.queued] = b
	w.msgs[w.queued].Buffers[0] = b
	w.msgs[w.queued].Addr = to
	w.queued++
	if w.queued == batchSize {
		w.flush()
	}
}

// flush sends the queued packets.
func (w *forwarder) flush() {
	msgs := w.msgs[:w.queued]
	for len(msgs) > 0 {
		n, err := w.pc.WriteBatch(msgs, 0)
		if err != nil {
			w.md.m.sendErrors.Add(float64(len(msgs)))
			break
		}
		var bytes int
		for _, m := range msgs[:n] {
			bytes += len(m.Buffers[0])
		}
		w.md.m.packetsForwarded.Add(float64(n))
		w.md.m.bytesForwarded.Add(float64(bytes))
		msgs = msgs[n:]
	}
	w.queued = 0
}

func (w *forwarder) drop(reason string) { w.md.m.dropped[reason].Inc() }

// run reads datagrams until the socket closes.
func (w *forwarder) run(ctx context.Context) error {
	for {
		n, from, err := w.conn.ReadFromUDPAddrPort(w.in)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			continue
		}
		if n >= len(w.in) {
			w.drop(dropOversize) // truncated: larger than any voice packet
			continue
		}
		w.handle(w.in[:n], netip.AddrPortFrom(from.Addr().Unmap(), from.Port()))
	}
}

// handle routes one datagram.
func (w *forwarder) handle(pkt []byte, from netip.AddrPort) {
	switch {
	case len(pkt) == discovery.Size && pkt[0] == 0:
		w.discover(pkt, from)
		return
	case len(pkt) == 8:
		// discord.js sends an 8-byte keepalive every 5 s from the moment its
		// socket opens, before IP discovery too; nothing answers it.
		if w.md.byAddr(from) != nil {
			w.md.m.keepalives.Inc()
		} else {
			w.drop(dropUnbound)
		}
		return
	case len(pkt) > rtpsize.MaxPacket:
		w.drop(dropOversize)
		return
	}
	if len(pkt) < 12 || pkt[0]>>6 != 2 {
		w.drop(dropMalformed)
		return
	}
	ssrc := binary.BigEndian.Uint32(pkt[8:12])
	p := w.md.byAddr(from)
	if p == nil {
		// Not bound: accept only a NAT rebinding that IP discovery
		// announced for this SSRC and the session key proves.
		cand := w.md.bySSRC(ssrc)
		if cand == nil || cand.candidate.Load() == nil || *cand.candidate.Load() != from {
			w.drop(dropUnbound)
			return
		}
		p = cand
	}
	if pt := pkt[1] & 0x7f; pt >= 72 && pt <= 76 {
		// RTCP (types 200–204 with the marker bit): the bot libraries send
		// none, and nothing here needs a UDP client's reports yet.
		w.drop(dropRTCP)
		return
	}
	if ssrc != p.ssrc {
		w.drop(dropSSRC)
		return
	}
	c := p.cipher.Load()
	if c == nil {
		w.drop(dropNoKey)
		return
	}
	plain, h, counter, err := c.Open(w.plain[:0], pkt)
	if err != nil {
		if errors.Is(err, rtpsize.ErrAuth) {
			w.drop(dropAuth)
		} else {
			w.drop(dropMalformed)
		}
		return
	}
	w.plain = plain[:0]
	p.mu.Lock()
	fresh := p.replay.Accept(counter)
	var gap int
	if fresh {
		gap = p.quality.update(binary.BigEndian.Uint16(pkt[2:4]), binary.BigEndian.Uint32(pkt[4:8]), w.srv.cfg.Now())
	}
	p.mu.Unlock()
	if !fresh {
		w.drop(dropReplay)
		return
	}
	if gap > 0 {
		w.md.m.lost.Add(float64(gap))
	}
	if a := p.addr.Load(); a == nil || *a != from {
		w.md.bind(p, from) // the candidate proved itself
		p.candidate.Store(nil)
	}
	w.md.m.packetsIn.Inc()
	if p.mute.Load() {
		w.drop(dropMuted)
		return
	}
	w.forward(p, pkt[:h], plain)
}

// forward hands one packet to everyone else in the speaker's call.
func (w *forwarder) forward(from *participant, header, plain []byte) {
	for _, m := range from.call.snapshot() {
		if m == from || m.deaf.Load() {
			continue
		}
		w.out = m.deliver(w, from, header, plain, w.out)
	}
	w.flush()
}

// discover answers an IP discovery request and binds its source to the
// participant owning the SSRC: the first discovery binds, a later one from
// another address only marks a candidate (see handle).
func (w *forwarder) discover(pkt []byte, from netip.AddrPort) {
	ssrc, err := discovery.ParseRequest(pkt)
	if err != nil {
		w.drop(dropDiscovery)
		return
	}
	p := w.md.bySSRC(ssrc)
	if p == nil {
		w.drop(dropDiscovery)
		return
	}
	if a := p.addr.Load(); a == nil {
		w.md.bind(p, from)
	} else if *a != from {
		p.candidate.Store(&from)
	}
	resp, err := discovery.AppendResponse(w.out[:0], ssrc, from)
	if err != nil {
		w.drop(dropDiscovery)
		return
	}
	w.out = resp
	if _, err := w.conn.WriteToUDPAddrPort(resp, from); err != nil {
		w.md.m.sendErrors.Inc()
		return
	}
	w.md.m.discoveries.Inc()
}
