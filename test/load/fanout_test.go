package load

import (
	"flag"
	"os"
	"strconv"
	"strings"
	"testing"
)

var sizesFlag = flag.String("fanout.n", "1000,10000", "comma-separated session counts for BenchmarkFanout")

func TestMain(m *testing.M) {
	MaybeRunClient()
	os.Exit(m.Run())
}

// BenchmarkFanout sends one event to N sessions per round, for each size
// and system, and reports server CPU per delivery and latency percentiles.
func BenchmarkFanout(b *testing.B) {
	var sizes []int
	for _, s := range strings.Split(*sizesFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			b.Fatalf("-fanout.n: %v", err)
		}
		sizes = append(sizes, n)
	}
	var all []Result
	run := 0
	for _, n := range sizes {
		for _, system := range []string{SystemGateway, SystemCentrifuge, SystemWriteLoop} {
			b.Run(system+"/n="+strconv.Itoa(n), func(b *testing.B) {
				var res []Result
				for range b.N {
					var err error
					run++
					res, err = Run(b.Context(), Options{Sizes: []int{n}, Systems: []string{system}, FirstRun: run})
					if err != nil {
						b.Fatal(err)
					}
				}
				r := res[0]
				if r.Received != r.Deliveries {
					b.Fatalf("clients recorded %d of %d deliveries", r.Received, r.Deliveries)
				}
				b.ReportMetric(float64(r.CPUPerDelivery.Nanoseconds()), "cpu-ns/delivery")
				b.ReportMetric(float64(r.P50.Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(r.P99.Microseconds())/1000, "p99-ms")
				all = append(all, r)
			})
		}
	}
	if len(all) > 0 {
		_ = WriteTable(os.Stdout, all)
	}
}
