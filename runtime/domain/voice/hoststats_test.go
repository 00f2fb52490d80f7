package voice

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

const snmpSample = `Ip: Forwarding DefaultTTL InReceives
Ip: 1 64 12345
Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
Udp: 11037332 5630 203110 11275165 203108 0 2 0 0
UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
UdpLite: 0 0 0 0 7 0 0 0 0
`

func TestReadUDPStats(t *testing.T) {
	v, err := readUDPStats(strings.NewReader(snmpSample), "RcvbufErrors", "InErrors")
	if err != nil {
		t.Fatal(err)
	}
	if v["RcvbufErrors"] != 203108 || v["InErrors"] != 203110 {
		t.Fatalf("read %v, want RcvbufErrors 203108 and InErrors 203110 (Udp, not UdpLite)", v)
	}
	for _, bad := range []string{"", "Ip: a b\nIp: 1 2\n", "Udp: A B\nUdp: 1\n", "Udp: A B\nUdp: 1 x\n"} {
		if _, err := readUDPStats(strings.NewReader(bad), "B"); err == nil {
			t.Errorf("readUDPStats(%q) read something", bad)
		}
	}
}

// The collector exports the kernel's drops as counters at each scrape.
func TestKernelUDPCollector(t *testing.T) {
	path := filepath.Join(t.TempDir(), "snmp")
	if err := os.WriteFile(path, []byte(snmpSample), 0o600); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(newUDPCollector("sfu-1", path))
	want := `
# HELP concord_voice_kernel_udp_receive_buffer_drops_total UDP datagrams the kernel dropped because a socket's receive buffer was full (the network namespace's Udp RcvbufErrors): media that reached the host but never the SFU.
# TYPE concord_voice_kernel_udp_receive_buffer_drops_total counter
concord_voice_kernel_udp_receive_buffer_drops_total{server="sfu-1"} 203108
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "concord_voice_kernel_udp_receive_buffer_drops_total"); err != nil {
		t.Fatal(err)
	}
	// No file (not Linux): nothing, no error.
	none := prometheus.NewRegistry()
	none.MustRegister(newUDPCollector("sfu-1", filepath.Join(t.TempDir(), "absent")))
	if n, err := testutil.GatherAndCount(none); err != nil || n != 0 {
		t.Fatalf("without the file: %d series, %v", n, err)
	}
}

// The CPU clock the per-core rate divides by moves while the process
// works.
func TestProcessCPUSecondsAdvances(t *testing.T) {
	a := processCPUSeconds()
	deadline := time.Now().Add(30 * time.Second)
	sum := 0
	for processCPUSeconds() == a {
		if time.Now().After(deadline) {
			t.Fatalf("process CPU seconds stayed %v through 30 s of work", a)
		}
		for i := range 100_000 {
			sum += i
		}
	}
	if sum < 0 {
		t.Log(sum)
	}
}
