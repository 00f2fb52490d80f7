package livetest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

var registered atomic.Int64

// Register creates accounts through the chat API's POST /auth/register.
func Register(base string) func(t testing.TB) User {
	return func(t testing.TB) User {
		t.Helper()
		name := fmt.Sprintf("viewer%d_%d", time.Now().UnixNano()%1e6, registered.Add(1))
		body, _ := json.Marshal(map[string]any{"username": name, "password": "correct horse battery"})
		resp, err := http.Post(base+"/api/v10/auth/register", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Token  string `json:"token"`
			UserID string `json:"user_id"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
			t.Fatalf("register %s = %d %v", name, resp.StatusCode, err)
		}
		id, err := snowflake.Parse(out.UserID)
		if err != nil {
			t.Fatalf("register %s: user_id %q: %v", name, out.UserID, err)
		}
		return User{ID: id, Name: name, Token: out.Token}
	}
}

// MetricViewers reads concord_live_gateway_viewers from each base's
// /metrics and sums them.
func MetricViewers(bases ...string) func(t testing.TB) int {
	return func(t testing.TB) int {
		t.Helper()
		total := 0
		for _, base := range bases {
			resp, err := http.Get(base + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			found := false
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if v, ok := strings.CutPrefix(sc.Text(), "concord_live_gateway_viewers "); ok {
					f, err := strconv.ParseFloat(v, 64)
					if err != nil {
						t.Fatalf("metric line %q: %v", sc.Text(), err)
					}
					total += int(f)
					found = true
				}
			}
			resp.Body.Close()
			if !found {
				t.Fatalf("%s/metrics has no concord_live_gateway_viewers", base)
			}
		}
		return total
	}
}

// Metric returns the sum of the series of the metric name at base's
// /metrics (0 when it has none).
func Metric(t testing.TB, base, name string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+" ") && !strings.HasPrefix(line, name+"{") {
			continue
		}
		f, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		sum += f
	}
	return sum
}
