package voice

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
)

// The kernel's view of the server's traffic, which no counter of the
// server's own can see: datagrams the kernel dropped before the server
// read them (a media socket's receive buffer full: NIC-to-socket drops),
// and the process's CPU time, to turn forwarded packets into packets per
// core.

// snmpPath is the kernel's per-network-namespace protocol counters; in a
// pod of its own (the operator's SFU pods) they are the SFU's alone.
const snmpPath = "/proc/net/snmp"

// readUDPStats reads the Udp lines of /proc/net/snmp's format: a header
// line naming the fields and a line of values. It returns the named
// fields' values.
func readUDPStats(r io.Reader, fields ...string) (map[string]uint64, error) {
	sc := bufio.NewScanner(r)
	var names []string
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "Udp: ") {
			continue
		}
		parts := strings.Fields(line)[1:]
		if names == nil {
			names = parts
			continue
		}
		if len(parts) != len(names) {
			return nil, fmt.Errorf("voice: %s: %d Udp values for %d names", snmpPath, len(parts), len(names))
		}
		out := make(map[string]uint64, len(fields))
		for _, f := range fields {
			for i, n := range names {
				if n == f {
					v, err := strconv.ParseUint(parts[i], 10, 64)
					if err != nil {
						return nil, fmt.Errorf("voice: %s: Udp %s: %w", snmpPath, f, err)
					}
					out[f] = v
				}
			}
		}
		return out, nil
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("voice: read %s: %w", snmpPath, err)
	}
	return nil, fmt.Errorf("voice: %s has no Udp counters", snmpPath)
}

// udpCollector exports the kernel's UDP receive drops of the network
// namespace, read at each scrape.
type udpCollector struct {
	path          string
	rcvbuf, inErr *prometheus.Desc
}

func newUDPCollector(server, path string) *udpCollector {
	l := prometheus.Labels{"server": server}
	return &udpCollector{
		path: path,
		rcvbuf: prometheus.NewDesc("concord_voice_kernel_udp_receive_buffer_drops_total",
			"UDP datagrams the kernel dropped because a socket's receive buffer was full (the network namespace's Udp RcvbufErrors): media that reached the host but never the SFU.", nil, l),
		inErr: prometheus.NewDesc("concord_voice_kernel_udp_receive_errors_total",
			"UDP datagrams the kernel could not deliver (the network namespace's Udp InErrors: full buffers, bad checksums).", nil, l),
	}
}

// Describe implements prometheus.Collector.
func (c *udpCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.rcvbuf; ch <- c.inErr }

// Collect implements prometheus.Collector; without the file (not Linux)
// it exports nothing.
func (c *udpCollector) Collect(ch chan<- prometheus.Metric) {
	f, err := os.Open(c.path)
	if err != nil {
		return
	}
	defer f.Close()
	v, err := readUDPStats(f, "RcvbufErrors", "InErrors")
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.rcvbuf, prometheus.CounterValue, float64(v["RcvbufErrors"]))
	ch <- prometheus.MustNewConstMetric(c.inErr, prometheus.CounterValue, float64(v["InErrors"]))
}

// processCPUSeconds is the process's user and system CPU time so far (0
// when the platform cannot tell).
func processCPUSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}
