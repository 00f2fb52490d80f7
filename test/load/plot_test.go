package load

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestWritePlot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fanout.svg")
	results := []Result{
		{System: SystemGateway, N: 1000, CPUPerDelivery: 2 * time.Microsecond},
		{System: SystemGateway, N: 10000, CPUPerDelivery: 3 * time.Microsecond},
		{System: SystemCentrifuge, N: 1000, CPUPerDelivery: 5 * time.Microsecond},
	}
	if err := WritePlot(path, results); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if !strings.HasPrefix(s, "<?xml") || !strings.Contains(s, "<svg") || !strings.Contains(s, SystemCentrifuge) {
		t.Fatalf("not an SVG naming the systems: %.200s", s)
	}
}

func TestWriteCDFPlot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cdf.svg")
	var ps []time.Duration
	for p := 0; p <= 100; p++ {
		ps = append(ps, time.Duration(p+1)*time.Millisecond)
	}
	if err := WriteCDFPlot(path, []Result{{System: SystemGateway, N: 1000, Percentiles: ps}}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(b); !strings.Contains(s, "<svg") || !strings.Contains(s, SystemGateway+" N=1000") {
		t.Fatalf("not an SVG naming the line: %.200s", s)
	}
	// Nothing measured: no figure.
	if err := WriteCDFPlot(filepath.Join(t.TempDir(), "none.svg"), []Result{{System: SystemGateway, N: 1}}); err == nil {
		t.Fatal("a plot of nothing was written")
	}
}
