package egress_test

import (
	"net/netip"
	"testing"

	"github.com/concord-chat/concord/runtime/adapters/egress"
)

func TestDenied(t *testing.T) {
	for _, c := range []struct {
		addr, reason string
	}{
		{"127.0.0.1", egress.ReasonLoopback},
		{"127.255.255.254", egress.ReasonLoopback},
		{"10.0.0.1", egress.ReasonPrivate},
		{"10.255.255.255", egress.ReasonPrivate},
		{"172.16.0.1", egress.ReasonPrivate},
		{"172.31.255.255", egress.ReasonPrivate},
		{"192.168.1.1", egress.ReasonPrivate},
		{"169.254.169.254", egress.ReasonMetadata},
		{"169.254.0.1", egress.ReasonLinkLocal},
		{"169.254.255.255", egress.ReasonLinkLocal},
		{"100.64.0.1", egress.ReasonCGNAT},
		{"100.127.255.255", egress.ReasonCGNAT},
		{"0.0.0.0", egress.ReasonUnspecified},
		{"0.1.2.3", egress.ReasonThisNetwork},
		{"224.0.0.1", egress.ReasonMulticast},
		{"239.255.255.250", egress.ReasonMulticast},
		{"255.255.255.255", egress.ReasonReserved},
		{"240.0.0.1", egress.ReasonReserved},
		{"192.0.0.8", egress.ReasonReserved},
		{"192.0.2.1", egress.ReasonDocumentation},
		{"198.18.0.1", egress.ReasonReserved},
		{"198.51.100.7", egress.ReasonDocumentation},
		{"203.0.113.9", egress.ReasonDocumentation},
		{"::1", egress.ReasonLoopback},
		{"::", egress.ReasonUnspecified},
		{"fc00::1", egress.ReasonULA},
		{"fd12:3456::1", egress.ReasonULA},
		{"fd00:ec2::254", egress.ReasonMetadata},
		{"fe80::1", egress.ReasonLinkLocal},
		{"febf::1", egress.ReasonLinkLocal},
		{"fec0::1", egress.ReasonULA},
		{"ff02::1", egress.ReasonMulticast},
		{"::ffff:127.0.0.1", egress.ReasonLoopback},
		{"::ffff:10.0.0.1", egress.ReasonPrivate},
		{"::ffff:169.254.169.254", egress.ReasonMetadata},
		{"::ffff:0.0.0.0", egress.ReasonUnspecified},
		{"0:0:0:0:0:ffff:7f00:1", egress.ReasonLoopback},
		{"64:ff9b::a00:1", egress.ReasonPrivate},
		{"64:ff9b::7f00:1", egress.ReasonLoopback},
		{"64:ff9b::a9fe:a9fe", egress.ReasonMetadata},
		{"64:ff9b:1::808:808", egress.ReasonTunnel},
		{"::127.0.0.1", egress.ReasonIPv4Compatible},
		{"::a00:1", egress.ReasonIPv4Compatible},
		{"::808:808", egress.ReasonIPv4Compatible},
		{"2002:7f00:1::1", egress.ReasonLoopback},
		{"2002:a9fe:a9fe::", egress.ReasonMetadata},
		{"2002:a00:1::5", egress.ReasonPrivate},
		{"2001::1", egress.ReasonTunnel},
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", egress.ReasonTunnel},
		{"2001:db8::1", egress.ReasonDocumentation},
		{"100::1", egress.ReasonReserved},
		{"fe80::1%eth0", egress.ReasonZone},
		{"2606:4700::1111%1", egress.ReasonZone},
	} {
		reason, denied := egress.Denied(netip.MustParseAddr(c.addr))
		if !denied || reason != c.reason {
			t.Errorf("Denied(%s) = %q, %v; want %q, true", c.addr, reason, denied, c.reason)
		}
	}
	if reason, denied := egress.Denied(netip.Addr{}); !denied {
		t.Errorf("Denied(zero Addr) = %q, false", reason)
	}
	for _, a := range []string{
		"8.8.8.8", "1.1.1.1", "93.184.216.34", "11.0.0.1", "100.63.255.255", "100.128.0.0",
		"172.15.255.255", "172.32.0.0", "169.253.255.255", "169.255.0.0", "192.169.0.1",
		"223.255.255.255", "2606:4700::1111", "2a00:1450:4001::200e", "::ffff:8.8.8.8",
		"64:ff9b::808:808", "2002:808:808::1",
	} {
		if reason, denied := egress.Denied(netip.MustParseAddr(a)); denied {
			t.Errorf("Denied(%s) = %q, true; want allowed", a, reason)
		}
	}
}
