package voice

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/voice/rtpsize"
)

// callKey names a call: one voice channel of one guild.
type callKey struct {
	guild, channel snowflake.ID
}

// call is the set of participants of one voice channel on this server.
// members is a copy-on-write snapshot read lock-free by the UDP path.
type call struct {
	key     callKey
	mu      sync.Mutex // guards changes to members
	members atomic.Pointer[[]*participant]
}

func newCall(k callKey) *call {
	c := &call{key: k}
	c.members.Store(&[]*participant{})
	return c
}

func (c *call) snapshot() []*participant { return *c.members.Load() }

// add appends p; it reports false when the call is full.
func (c *call) add(p *participant, limit int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.snapshot()
	if len(old) >= limit {
		return false
	}
	next := make([]*participant, len(old), len(old)+1)
	copy(next, old)
	next = append(next, p)
	c.members.Store(&next)
	return true
}

// remove drops p and returns how many remain.
func (c *call) remove(p *participant) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.snapshot()
	next := make([]*participant, 0, len(old))
	for _, m := range old {
		if m != p {
			next = append(next, m)
		}
	}
	c.members.Store(&next)
	return len(next)
}

// listener receives forwarded media. UDP participants seal with their key;
// WebRTC participants hand the clear packet to their peer connection.
type listener interface {
	// deliver sends one packet: header is the unencrypted RTP header (with
	// the extension header), plain the rest in the clear. buf is scratch
	// space the listener may use; it returns it (possibly grown).
	deliver(w *forwarder, from *participant, header, plain, buf []byte) []byte
}

// participant is one user's media state in a call.
type participant struct {
	userID snowflake.ID
	ssrc   uint32
	call   *call
	sess   *session

	// cipher is the session's rtpsize cipher, nil until select protocol.
	cipher atomic.Pointer[rtpsize.Cipher]
	// addr is the UDP address media goes to and comes from: the source of
	// the first IP discovery, later a candidate proven by a packet that
	// authenticated with the session key (a NAT rebinding).
	addr      atomic.Pointer[netip.AddrPort]
	udpAddr   atomic.Pointer[net.UDPAddr] // addr, ready for sendmmsg
	candidate atomic.Pointer[netip.AddrPort]
	// out is the nonce counter of packets sealed for this listener.
	out atomic.Uint32
	// mute and deaf are the guild's server mute and deafen: a muted
	// speaker is not forwarded, a deafened listener is sent nothing.
	mute, deaf atomic.Bool
	// selfMute and selfDeaf are the user's own, kept for the roster.
	selfMute, selfDeaf atomic.Bool
	// sink, when set, replaces UDP delivery (a WebRTC peer).
	sink atomic.Pointer[listenerBox]

	// rtt collects the round trips this participant's WebRTC peer
	// reports, for the period's call quality.
	rtt rttSample

	mu      sync.Mutex // guards replay and quality, touched by UDP readers
	replay  rtpsize.ReplayWindow
	quality streamQuality
}

type listenerBox struct{ l listener }

// deliver seals for a UDP listener.
func (p *participant) deliver(w *forwarder, from *participant, header, plain, buf []byte) []byte {
	if b := p.sink.Load(); b != nil {
		return b.l.deliver(w, from, header, plain, buf)
	}
	c := p.cipher.Load()
	to := p.udpAddr.Load()
	if c == nil || to == nil {
		return buf
	}
	w.enqueue(c.Seal(w.slot(), header, plain, p.out.Add(1)), to)
	return buf
}
