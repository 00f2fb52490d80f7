package egress

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// hostile resolves every name to a loopback and a private address.
type hostile struct{}

func (hostile) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("10.0.0.1")}, nil
}

func fuzzClient(tb testing.TB) *Client {
	c, err := New(Config{Resolver: hostile{}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

var hostSeeds = []string{
	"2130706433", "0177.0.0.1", "127.1", "0x7f.0.0.1", "0x7f000001", "017700000001", "127.000.0.1",
	"localhost", "::ffff:127.0.0.1", "64:ff9b::a00:1", "::1", "example.com", "8.8.8.8", "127.0.0.1.",
	"0x", "1.2.3.4.5", "fe80::1%eth0", "169.254.169.254", "2002:7f00:1::", "::127.0.0.1", "0", "",
	"[::1]", "1.1.1.1%", "4294967295", "4294967296", "0xffffffff", "00000000000000000000000000177.0.0.1",
}

// FuzzResolve checks that whatever the host string, the addresses the
// Client would dial are never denied: names resolve only to denied
// addresses here, so only canonical public literals may pass, and every
// decimal, octal or hex spelling of an address is refused.
func FuzzResolve(f *testing.F) {
	for _, s := range hostSeeds {
		f.Add(s)
	}
	c := fuzzClient(f)
	f.Fuzz(func(t *testing.T, host string) {
		addrs, err := c.resolve(context.Background(), host)
		if err != nil {
			return
		}
		for _, a := range addrs {
			if reason, denied := Denied(a); denied {
				t.Fatalf("resolve(%q) would dial %s (%s)", host, a, reason)
			}
		}
		lit, perr := netip.ParseAddr(host)
		if len(addrs) != 1 || perr != nil || addrs[0] != lit || (lit.Is4() && lit.String() != host) {
			t.Fatalf("resolve(%q) = %v: only a literal (a canonical one for IPv4) can pass a resolver of private addresses", host, addrs)
		}
		if _, err := strconv.ParseUint(host, 0, 32); err == nil {
			t.Fatalf("resolve(%q) passed a bare number", host)
		}
	})
}

// FuzzURL checks the whole pre-dial path: a URL that passes checkURL and
// resolve connects only to allowed addresses.
func FuzzURL(f *testing.F) {
	for _, s := range hostSeeds {
		f.Add("http://" + s + "/")
		f.Add("https://[" + s + "]:443/x")
	}
	f.Add("http://user@8.8.8.8/")
	f.Add("http://%31%32%37.0.0.1/")
	f.Add("http://[::ffff:7f00:1]:80/")
	c := fuzzClient(f)
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := url.Parse(raw)
		if err != nil {
			return
		}
		if err := c.checkURL(u); err != nil {
			if !errors.Is(err, ErrInvalidURL) && !errors.Is(err, ErrForbiddenAddress) {
				t.Fatalf("checkURL(%q): unclassified error %v", raw, err)
			}
			return
		}
		addrs, err := c.resolve(context.Background(), u.Hostname())
		if err != nil {
			return
		}
		for _, a := range addrs {
			if reason, denied := Denied(a); denied {
				t.Fatalf("%q would dial %s (%s)", raw, a, reason)
			}
			if err := c.control("tcp", netipAddrPort(a), nil); err != nil {
				t.Fatalf("%q: resolve passed %s but the dial-time check refuses it: %v", raw, a, err)
			}
		}
	})
}

func netipAddrPort(a netip.Addr) string { return netip.AddrPortFrom(a, 443).String() }

// FuzzDenied checks that an IPv4 address and every IPv6 form that embeds
// it (mapped, NAT64, 6to4, compatible) are judged alike when denied.
func FuzzDenied(f *testing.F) {
	for _, s := range []string{"127.0.0.1", "10.0.0.1", "169.254.169.254", "8.8.8.8", "100.64.0.1", "0.0.0.0", "255.255.255.255"} {
		f.Add(netip.MustParseAddr(s).AsSlice())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < 4 {
			return
		}
		v4 := netip.AddrFrom4([4]byte(b[:4]))
		_, denied := Denied(v4)
		mapped := netip.AddrFrom16(v4.As16())
		var nat, six, compat [16]byte
		copy(nat[:], netip.MustParseAddr("64:ff9b::").AsSlice())
		copy(nat[12:], b[:4])
		six[0], six[1] = 0x20, 0x02
		copy(six[2:6], b[:4])
		copy(compat[12:], b[:4])
		forms := map[string]netip.Addr{"mapped": mapped, "nat64": netip.AddrFrom16(nat), "6to4": netip.AddrFrom16(six)}
		for name, a := range forms {
			if _, d := Denied(a); d != denied {
				t.Fatalf("Denied(%s) = %v but its %s form %s is %v", v4, denied, name, a, d)
			}
		}
		if _, d := Denied(netip.AddrFrom16(compat)); !d {
			t.Fatalf("IPv4-compatible form of %s allowed", v4)
		}
		if len(b) >= 16 {
			a := netip.AddrFrom16([16]byte(b[:16]))
			if r, d := Denied(a); !d && (strings.HasPrefix(a.String(), "fe8") || a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsMulticast() || a.IsUnspecified()) {
				t.Fatalf("Denied(%s) = %q, false; the standard library calls it special", a, r)
			}
		}
	})
}

func TestControl(t *testing.T) {
	c := fuzzClient(t)
	for addr, want := range map[string]bool{"127.0.0.1:80": false, "[::1]:443": false, "[::ffff:10.0.0.1]:80": false, "169.254.169.254:80": false, "8.8.8.8:443": true, "[2606:4700::1111]:443": true, "garbage": false} {
		if err := c.control("tcp", addr, nil); (err == nil) != want {
			t.Errorf("control(%s) = %v, want allowed %v", addr, err, want)
		}
	}
}
