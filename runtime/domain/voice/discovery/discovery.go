// Package discovery is the IP discovery exchange of Discord's voice UDP:
// a client sends a 74-byte request carrying its SSRC, and the server answers
// with the address and port it saw the request come from, so the client
// learns its public (NATed) address. All fields are big-endian:
//
//	u16 type (1 request, 2 response) · u16 length (70) · u32 SSRC ·
//	64-byte NUL-terminated address · u16 port
package discovery

import (
	"encoding/binary"
	"errors"
	"net/netip"
)

// Size is the length of every discovery packet.
const Size = 74

// Packet types.
const (
	TypeRequest  = 1
	TypeResponse = 2
)

// ErrMalformed is returned for anything but a well-formed request.
var ErrMalformed = errors.New("discovery: malformed packet")

// IsRequest reports whether pkt looks like a discovery request (cheap
// enough to run on every datagram before RTP parsing: RTP's first byte is
// 0x80 or more, a request's is 0x00).
func IsRequest(pkt []byte) bool {
	return len(pkt) == Size && binary.BigEndian.Uint16(pkt) == TypeRequest
}

// ParseRequest returns the SSRC of a request.
func ParseRequest(pkt []byte) (uint32, error) {
	if !IsRequest(pkt) || binary.BigEndian.Uint16(pkt[2:]) != Size-4 {
		return 0, ErrMalformed
	}
	return binary.BigEndian.Uint32(pkt[4:]), nil
}

// AppendResponse appends the response for ssrc telling the client it was
// seen at addr. Only IPv4 is spelled (clients reject anything else), so an
// IPv4-mapped IPv6 address is unmapped first.
func AppendResponse(dst []byte, ssrc uint32, addr netip.AddrPort) ([]byte, error) {
	ip := addr.Addr().Unmap()
	if !ip.Is4() {
		return dst, ErrMalformed
	}
	var p [Size]byte
	binary.BigEndian.PutUint16(p[0:], TypeResponse)
	binary.BigEndian.PutUint16(p[2:], Size-4)
	binary.BigEndian.PutUint32(p[4:], ssrc)
	copy(p[8:8+63], ip.String())
	binary.BigEndian.PutUint16(p[Size-2:], addr.Port())
	return append(dst, p[:]...), nil
}

// AppendRequest appends a request for ssrc (what a client sends).
func AppendRequest(dst []byte, ssrc uint32) []byte {
	var p [Size]byte
	binary.BigEndian.PutUint16(p[0:], TypeRequest)
	binary.BigEndian.PutUint16(p[2:], Size-4)
	binary.BigEndian.PutUint32(p[4:], ssrc)
	return append(dst, p[:]...)
}

// ParseResponse reads a response the way clients do: the NUL-terminated
// ASCII address from byte 8 and the port from the last two bytes.
func ParseResponse(pkt []byte) (uint32, netip.AddrPort, error) {
	if len(pkt) != Size || binary.BigEndian.Uint16(pkt) != TypeResponse {
		return 0, netip.AddrPort{}, ErrMalformed
	}
	end := 8
	for end < Size-2 && pkt[end] != 0 {
		end++
	}
	ip, err := netip.ParseAddr(string(pkt[8:end]))
	if err != nil || !ip.Is4() {
		return 0, netip.AddrPort{}, ErrMalformed
	}
	return binary.BigEndian.Uint32(pkt[4:]), netip.AddrPortFrom(ip, binary.BigEndian.Uint16(pkt[Size-2:])), nil
}
