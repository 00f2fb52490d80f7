//go:build integration

package observability

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	obs "github.com/concord-chat/concord/internal/observability"
)

// promDir is the directory holding prometheus and promtool, or a failure
// saying how to get them.
func promDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("CONCORD_PROMETHEUS_DIR")
	if dir == "" {
		t.Fatal("CONCORD_PROMETHEUS_DIR is unset: run `make test` (hack/test-deps.sh builds Prometheus and promtool " +
			"with hack/prometheus/build.sh and exports it), or export CONCORD_PROMETHEUS_DIR=$(bash hack/prometheus/build.sh | tail -n 1)")
	}
	for _, b := range []string{"prometheus", "promtool"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			t.Fatalf("CONCORD_PROMETHEUS_DIR=%s has no %s: %v", dir, b, err)
		}
	}
	return dir
}

// TestAlertRules runs promtool from the same build: `check rules` on the
// chart's generated rule file (expressions and annotation templates) and
// the threshold tests of internal/observability/testdata/alerts_test.yaml.
func TestAlertRules(t *testing.T) {
	dir := promDir(t)
	promtool := filepath.Join(dir, "promtool")
	if out, err := exec.Command(promtool, "check", "rules", "../../"+obs.RulesFile).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules %s: %v\n%s", obs.RulesFile, err, out)
	}
	work := t.TempDir()
	rules, err := obs.RulesYAMLForTest()
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile("../../internal/observability/testdata/alerts_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "rules.yaml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "alerts_test.yaml"), tests, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(promtool, "test", "rules", "alerts_test.yaml")
	cmd.Dir = work
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	// Every alert has a threshold test: a rule without one could have any
	// threshold at all.
	for _, a := range obs.Alerts() {
		if !strings.Contains(string(tests), "alertname: "+a.Name+"\n") {
			t.Errorf("alerts_test.yaml has no case for %s", a.Name)
		}
	}
}

// prometheus is a running Prometheus scraping targets.
type prometheus struct {
	addr string
	cmd  *exec.Cmd
	logs *strings.Builder
}

// job is a scrape job: its name and host:port targets.
type job struct {
	name    string
	targets []string
}

// startPrometheus starts the built Prometheus on a loopback port,
// scraping jobs every second, and waits until it is ready.
func startPrometheus(t *testing.T, dir string, jobs []job) *prometheus {
	t.Helper()
	work := t.TempDir()
	var cfg strings.Builder
	cfg.WriteString("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n")
	for _, j := range jobs {
		fmt.Fprintf(&cfg, "- job_name: %s\n  static_configs:\n  - targets: [%s]\n", j.name, strings.Join(j.targets, ", "))
	}
	if err := os.WriteFile(filepath.Join(work, "prometheus.yml"), []byte(cfg.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	p := &prometheus{addr: addr, logs: &strings.Builder{}}
	p.cmd = exec.Command(filepath.Join(dir, "prometheus"), "--config.file="+filepath.Join(work, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(work, "data"), "--web.listen-address="+addr, "--log.level=warn")
	out := &lockedWriter{b: p.logs}
	p.cmd.Stdout, p.cmd.Stderr = out, out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	t.Cleanup(func() { _ = p.cmd.Process.Kill(); _ = p.cmd.Wait() })
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get("http://" + addr + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready after a minute: %v\n%s", err, p.logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// queryResult is the part of /api/v1/query's answer the test reads.
type queryResult struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      struct {
		ResultType string            `json:"resultType"`
		Result     []json.RawMessage `json:"result"`
	} `json:"data"`
}

// query evaluates expr now through the HTTP API.
func (p *prometheus) query(ctx context.Context, expr string) (queryResult, error) {
	var r queryResult
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+p.addr+"/api/v1/query?query="+url.QueryEscape(expr), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return r, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return r, fmt.Errorf("decode answer (%d): %w", resp.StatusCode, err)
	}
	return r, nil
}

// targetsUp reports the scrape targets not up yet.
func (p *prometheus) targetsDown(ctx context.Context) ([]string, error) {
	r, err := p.query(ctx, "up == 0 or absent(up)")
	if err != nil {
		return nil, err
	}
	var down []string
	for _, s := range r.Data.Result {
		down = append(down, string(s))
	}
	return down, nil
}

// grafanaVars turns a dashboard query into one Prometheus evaluates: the
// variables Grafana would fill in, with every guild selected.
var grafanaVars = strings.NewReplacer("$__rate_interval", "1m", "$__range", "5m", "$guild", ".+")

// checkQueries evaluates every alert and dashboard query: each must parse,
// and each that must return series must return at least one before the
// deadline (the top-K guild ranking, rates over two scrapes and the
// traffic's first observations come within seconds), unless absent says
// why the deployment p scrapes cannot have it. It reports the queries
// still empty at the deadline together, named after what p scrapes.
func checkQueries(t *testing.T, ctx context.Context, p *prometheus, what string, deadline time.Time, absent func(expr string) string) {
	t.Helper()
	pending := map[string]obs.Query{}
	for _, q := range obs.AllQueries() {
		if absent != nil && q.MustReturn {
			if why := absent(q.Expr); why != "" {
				q.MustReturn = false
				t.Logf("%s: %s may return nothing: %s", what, q.Name, why)
			}
		}
		expr := grafanaVars.Replace(q.Expr)
		r, err := p.query(ctx, expr)
		if err != nil {
			t.Fatalf("%s: %v", q.Name, err)
		}
		if r.Status != "success" {
			t.Errorf("%s does not evaluate: %s: %s\n  %s", q.Name, r.ErrorType, r.Error, expr)
			continue
		}
		if q.MustReturn && len(r.Data.Result) == 0 {
			pending[q.Name] = q
		}
	}
	for len(pending) > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Second) // the next scrape
		for name, q := range pending {
			r, err := p.query(ctx, grafanaVars.Replace(q.Expr))
			if err == nil && r.Status == "success" && len(r.Data.Result) > 0 {
				delete(pending, name)
			}
		}
	}
	for name, q := range pending {
		t.Errorf("%s: %s returns no series (a misspelt metric, or a series the runtime does not export):\n  %s", what, name, grafanaVars.Replace(q.Expr))
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
