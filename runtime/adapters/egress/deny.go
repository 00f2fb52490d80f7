package egress

import (
	"net/netip"
	"strconv"
	"strings"
)

// Reasons an address is denied; they label concord_egress_denials_total.
const (
	ReasonUnspecified    = "unspecified"     // 0.0.0.0, ::
	ReasonThisNetwork    = "this_network"    // 0.0.0.0/8
	ReasonLoopback       = "loopback"        // 127.0.0.0/8, ::1
	ReasonPrivate        = "private"         // RFC 1918
	ReasonCGNAT          = "cgnat"           // 100.64.0.0/10
	ReasonMetadata       = "metadata"        // 169.254.169.254, fd00:ec2::254
	ReasonLinkLocal      = "link_local"      // 169.254.0.0/16, fe80::/10
	ReasonReserved       = "reserved"        // IETF, benchmarking, 240.0.0.0/4, broadcast
	ReasonDocumentation  = "documentation"   // TEST-NETs, 2001:db8::/32
	ReasonMulticast      = "multicast"       // 224.0.0.0/4, ff00::/8
	ReasonULA            = "ula"             // fc00::/7, fec0::/10
	ReasonIPv4Compatible = "ipv4_compatible" // ::/96 (deprecated embedding)
	ReasonTunnel         = "tunnel"          // Teredo, local-use NAT64, 6to4 of a denied address
	ReasonZone           = "zone"            // an IPv6 scope zone
	ReasonNonCanonical   = "noncanonical"    // 2130706433, 0177.0.0.1, 0x7f.1
)

type deniedPrefix struct {
	p      netip.Prefix
	reason string
}

// deniedV4 lists the IPv4 ranges egress never connects to. Order matters
// only for the reason reported: the first match wins.
var deniedV4 = []deniedPrefix{
	{netip.MustParsePrefix("169.254.169.254/32"), ReasonMetadata},
	{netip.MustParsePrefix("0.0.0.0/32"), ReasonUnspecified},
	{netip.MustParsePrefix("0.0.0.0/8"), ReasonThisNetwork},
	{netip.MustParsePrefix("10.0.0.0/8"), ReasonPrivate},
	{netip.MustParsePrefix("100.64.0.0/10"), ReasonCGNAT},
	{netip.MustParsePrefix("127.0.0.0/8"), ReasonLoopback},
	{netip.MustParsePrefix("169.254.0.0/16"), ReasonLinkLocal},
	{netip.MustParsePrefix("172.16.0.0/12"), ReasonPrivate},
	{netip.MustParsePrefix("192.0.0.0/24"), ReasonReserved},
	{netip.MustParsePrefix("192.0.2.0/24"), ReasonDocumentation},
	{netip.MustParsePrefix("192.88.99.0/24"), ReasonReserved},
	{netip.MustParsePrefix("192.168.0.0/16"), ReasonPrivate},
	{netip.MustParsePrefix("198.18.0.0/15"), ReasonReserved},
	{netip.MustParsePrefix("198.51.100.0/24"), ReasonDocumentation},
	{netip.MustParsePrefix("203.0.113.0/24"), ReasonDocumentation},
	{netip.MustParsePrefix("224.0.0.0/4"), ReasonMulticast},
	{netip.MustParsePrefix("240.0.0.0/4"), ReasonReserved}, // includes 255.255.255.255
}

// deniedV6 lists the IPv6 ranges denied outright. IPv4-mapped, NAT64 and
// 6to4 addresses are judged by the IPv4 address they carry (see Denied).
var deniedV6 = []deniedPrefix{
	{netip.MustParsePrefix("::/128"), ReasonUnspecified},
	{netip.MustParsePrefix("::1/128"), ReasonLoopback},
	{netip.MustParsePrefix("::/96"), ReasonIPv4Compatible},
	{netip.MustParsePrefix("64:ff9b:1::/48"), ReasonTunnel}, // local-use NAT64 (RFC 8215)
	{netip.MustParsePrefix("100::/64"), ReasonReserved},     // discard-only
	{netip.MustParsePrefix("2001::/32"), ReasonTunnel},      // Teredo: the client address is obfuscated
	{netip.MustParsePrefix("2001:db8::/32"), ReasonDocumentation},
	{netip.MustParsePrefix("fd00:ec2::254/128"), ReasonMetadata},
	{netip.MustParsePrefix("fc00::/7"), ReasonULA},
	{netip.MustParsePrefix("fe80::/10"), ReasonLinkLocal},
	{netip.MustParsePrefix("fec0::/10"), ReasonULA}, // deprecated site-local
	{netip.MustParsePrefix("ff00::/8"), ReasonMulticast},
}

var (
	nat64  = netip.MustParsePrefix("64:ff9b::/96")
	sixTo4 = netip.MustParsePrefix("2002::/16")
)

// Denied reports whether egress must never connect to addr, and why. It
// knows no allowlist (Config.AllowPrivate is the Client's business).
//
// An IPv6 address that embeds an IPv4 address — IPv4-mapped
// (::ffff:a.b.c.d), NAT64 (64:ff9b::a.b.c.d) or 6to4 (2002:aabb:ccdd::) — is
// denied when the embedded address is, so ::ffff:127.0.0.1 and
// 64:ff9b::a00:1 are loopback and private. Addresses with a zone and the
// invalid zero Addr are denied.
func Denied(addr netip.Addr) (reason string, denied bool) {
	if !addr.IsValid() {
		return ReasonUnspecified, true
	}
	if addr.Zone() != "" {
		return ReasonZone, true
	}
	if addr.Is4In6() {
		return deniedIn(deniedV4, addr.Unmap())
	}
	if addr.Is4() {
		return deniedIn(deniedV4, addr)
	}
	if nat64.Contains(addr) {
		b := addr.As16()
		return deniedIn(deniedV4, netip.AddrFrom4([4]byte(b[12:16])))
	}
	if sixTo4.Contains(addr) {
		b := addr.As16()
		if reason, denied := deniedIn(deniedV4, netip.AddrFrom4([4]byte(b[2:6]))); denied {
			return reason, true
		}
		return "", false
	}
	return deniedIn(deniedV6, addr)
}

func deniedIn(list []deniedPrefix, addr netip.Addr) (string, bool) {
	for _, d := range list {
		if d.p.Contains(addr) {
			return d.reason, true
		}
	}
	return "", false
}

// parseHost reads a URL host (without port or brackets) as an address.
// A canonical literal ("1.2.3.4", "::1") returns it with literal true. A
// host that inet_aton(3) and other URL parsers would take for an IPv4
// address but that is not a canonical dotted quad ("2130706433",
// "0177.0.0.1", "0x7f.1", "127.1") returns noncanonical true: egress refuses
// it rather than guess which address some resolver would make of it.
func parseHost(host string) (addr netip.Addr, literal, noncanonical bool) {
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Is4() && a.String() != host {
			return netip.Addr{}, false, true // leading zeros, which ParseAddr rejects anyway
		}
		return a, true, false
	}
	if _, ok := parseInetAton(host); ok {
		return netip.Addr{}, false, true
	}
	return netip.Addr{}, false, false
}

// parseInetAton accepts what inet_aton(3) accepts: one to four parts
// separated by dots, each decimal, octal (leading 0) or hex (0x), the last
// part filling the remaining bytes; a trailing dot is tolerated as some
// resolvers do.
func parseInetAton(s string) (netip.Addr, bool) {
	s = strings.TrimSuffix(s, ".")
	parts := strings.Split(s, ".")
	if len(parts) == 0 || len(parts) > 4 {
		return netip.Addr{}, false
	}
	vals := make([]uint64, len(parts))
	for i, p := range parts {
		if p == "" {
			return netip.Addr{}, false
		}
		base, digits := 10, p
		switch {
		case len(p) > 1 && (p[:2] == "0x" || p[:2] == "0X"):
			base, digits = 16, p[2:]
			if digits == "" {
				digits = "0" // inet_aton takes "0x" as zero
			}
		case len(p) > 1 && p[0] == '0':
			base, digits = 8, p[1:]
		}
		v, err := strconv.ParseUint(digits, base, 32)
		if err != nil {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	var n uint64
	for i, v := range vals[:len(vals)-1] {
		if v > 0xff {
			return netip.Addr{}, false
		}
		n |= v << (24 - 8*i)
	}
	last := vals[len(vals)-1]
	if last >= 1<<(8*(5-len(vals))) && len(vals) > 1 || last > 0xffffffff {
		return netip.Addr{}, false
	}
	n |= last
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
}
