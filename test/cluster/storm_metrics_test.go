//go:build integration && storm

package cluster

import (
	"bufio"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// histogram is a Prometheus histogram scraped from /metrics: cumulative
// counts by upper bound, summed over every label set the filter kept.
type histogram struct {
	bounds []float64
	counts map[float64]float64
}

// scrape reads /metrics of addr and returns the named histograms (series
// whose labels contain filter, "" for all) and the named counters and
// gauges (summed over label sets containing filter).
func scrape(addr string, hists []string, scalars []string, filter string) (map[string]histogram, map[string]float64, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, nil, fmt.Errorf("scrape %s: %w", addr, err)
	}
	defer resp.Body.Close()
	hs := map[string]histogram{}
	vals := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		name, labels, value, ok := parseSample(line)
		if !ok || !strings.Contains(labels, filter) {
			continue
		}
		for _, h := range hists {
			if name != h+"_bucket" {
				continue
			}
			le := labelValue(labels, "le")
			b, err := strconv.ParseFloat(le, 64)
			if le == "+Inf" {
				b, err = math.Inf(1), nil
			}
			if err != nil {
				continue
			}
			cur := hs[h]
			if cur.counts == nil {
				cur.counts = map[float64]float64{}
			}
			if _, seen := cur.counts[b]; !seen {
				cur.bounds = append(cur.bounds, b)
			}
			cur.counts[b] += value
			hs[h] = cur
		}
		for _, s := range scalars {
			if name == s {
				vals[s] += value
			}
		}
	}
	for k, h := range hs {
		sort.Float64s(h.bounds)
		hs[k] = h
	}
	return hs, vals, sc.Err()
}

// parseSample splits `name{labels} value`.
func parseSample(line string) (name, labels string, value float64, ok bool) {
	sp := strings.LastIndexByte(line, ' ')
	if sp < 0 {
		return "", "", 0, false
	}
	v, err := strconv.ParseFloat(line[sp+1:], 64)
	if err != nil {
		return "", "", 0, false
	}
	head := line[:sp]
	if i := strings.IndexByte(head, '{'); i >= 0 {
		return head[:i], head[i:], v, true
	}
	return head, "", v, true
}

// labelValue returns the value of label k in `{a="x",k="y"}`.
func labelValue(labels, k string) string {
	for _, sep := range []string{"{", ","} {
		if i := strings.Index(labels, sep+k+`="`); i >= 0 {
			rest := labels[i+len(sep)+len(k)+2:]
			if j := strings.IndexByte(rest, '"'); j >= 0 {
				return rest[:j]
			}
		}
	}
	return ""
}

// delta is after minus before, bucket by bucket.
func (h histogram) delta(before histogram) histogram {
	d := histogram{bounds: h.bounds, counts: map[float64]float64{}}
	for _, b := range h.bounds {
		d.counts[b] = h.counts[b] - before.counts[b]
	}
	return d
}

// total is the number of observations.
func (h histogram) total() float64 { return h.counts[math.Inf(1)] }

// quantile estimates the q-quantile as Prometheus's histogram_quantile
// does: linear interpolation inside the bucket holding it.
func (h histogram) quantile(q float64) float64 {
	n := h.total()
	if n == 0 {
		return math.NaN()
	}
	rank := q * n
	prevBound, prevCount := 0.0, 0.0
	for _, b := range h.bounds {
		c := h.counts[b]
		if c >= rank {
			if math.IsInf(b, 1) {
				return prevBound
			}
			if c == prevCount {
				return b
			}
			return prevBound + (b-prevBound)*(rank-prevCount)/(c-prevCount)
		}
		prevBound, prevCount = b, c
	}
	return prevBound
}
