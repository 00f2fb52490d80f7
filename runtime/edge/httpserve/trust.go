package httpserve

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// ParseTrustedProxies parses a TrustedProxies list: each entry an IP
// address (10.0.0.7, fd00::7) or a CIDR range (10.0.0.0/8). Blank entries
// are skipped, so "a, b," and the empty string are fine.
func ParseTrustedProxies(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if strings.Contains(s, "/") {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				return nil, fmt.Errorf("trusted proxy %q: %w", s, err)
			}
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("trusted proxy %q: %w", s, err)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// trust is the set of proxies whose word about the client's address is
// believed: a PROXY protocol header on their connections, an
// X-Forwarded-For header on their requests. A nil *trust trusts nobody.
type trust struct {
	prefixes []netip.Prefix
	// ranges is the list as go-proxyproto parses it (PolicyFromRanges).
	ranges []string
}

// newTrust returns the trust of cfg.TrustedProxies, nil when it is empty.
// Config.Validate reports a bad entry before a server starts; a list that
// gets here unchecked and does not parse trusts nobody (failing closed:
// a proxy's clients then share its address, which is safe, where
// trusting too much would let any client pick its address).
func newTrust(list []string, log *slog.Logger) *trust {
	p, err := ParseTrustedProxies(list)
	if err != nil {
		log.Error("httpserve: trusted proxies ignored, trusting none", "err", err)
		return nil
	}
	if len(p) == 0 {
		return nil
	}
	t := &trust{prefixes: p}
	for _, q := range p {
		t.ranges = append(t.ranges, q.String())
	}
	return t
}

// has reports whether a is a trusted proxy's address.
func (t *trust) has(a netip.Addr) bool {
	if t == nil || !a.IsValid() {
		return false
	}
	a = a.Unmap()
	for _, p := range t.prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// forwardedClient is the client address of a request from a trusted peer
// that carries X-Forwarded-For values xff: the right-most address that is
// not a trusted proxy. Each proxy appends the address it received the
// request from, so the entries left of the first untrusted one (reading
// from the right) are whatever the client chose to send and prove
// nothing. If every entry is trusted, the left-most is the client (the
// request started inside the trusted network). An entry that is not an
// address ends the walk: the last trusted hop before it is the client, as
// nothing further left can be believed. ok is false when xff holds no
// address at all.
func (t *trust) forwardedClient(xff []string) (client netip.Addr, ok bool) {
	var entries []string
	for _, v := range xff {
		entries = append(entries, strings.Split(v, ",")...)
	}
	for i := len(entries) - 1; i >= 0; i-- {
		a, err := parseForwardedAddr(entries[i])
		if err != nil {
			return client, ok
		}
		client, ok = a, true
		if !t.has(a) {
			return client, true
		}
	}
	return client, ok
}

// parseForwardedAddr parses one X-Forwarded-For entry: an IP address,
// possibly with a port ("1.2.3.4:5678", "[::1]:80") as some proxies write
// it.
func parseForwardedAddr(s string) (netip.Addr, error) {
	s = strings.TrimSpace(s)
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap(), nil
	}
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("X-Forwarded-For entry %q: %w", s, err)
	}
	return ap.Addr().Unmap(), nil
}

// clientRemoteAddr returns r.RemoteAddr, or, when the peer r came from is
// a trusted proxy and the request carries X-Forwarded-For, the client
// address it names (forwardedClient) with port 0: a forwarded address
// has no port of the client's.
func (t *trust) clientRemoteAddr(r *http.Request) string {
	if t == nil {
		return r.RemoteAddr
	}
	xff := r.Header.Values("X-Forwarded-For")
	if len(xff) == 0 || !t.has(hostAddr(r.RemoteAddr)) {
		return r.RemoteAddr
	}
	client, ok := t.forwardedClient(xff)
	if !ok {
		return r.RemoteAddr
	}
	return netip.AddrPortFrom(client, 0).String()
}

// hostAddr parses the IP of a host:port (or bare host) string; the zero
// Addr if it is not one.
func hostAddr(hostport string) netip.Addr {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap()
}
