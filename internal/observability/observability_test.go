package observability

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the repository root, from this package's directory.
const root = "../.."

// TestGeneratedFresh fails when the chart's generated files differ from
// what the source here generates: run
// `go run ./internal/observability/cmd/obsgen` (hack/generate.sh does).
func TestGeneratedFresh(t *testing.T) {
	files, err := Files()
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(root, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s is stale (%v): run go run ./internal/observability/cmd/obsgen", name, err)
		}
	}
	onDisk, _ := filepath.Glob(filepath.Join(root, DashboardDir, "*.json"))
	for _, p := range onDisk {
		rel, _ := filepath.Rel(root, p)
		if _, ok := files[filepath.ToSlash(rel)]; !ok {
			t.Errorf("%s is not generated from Dashboards(): remove it (obsgen does)", rel)
		}
	}
}

// TestRunbooks checks every alert has its runbook section in
// docs/operations.md, where its runbook_url points.
func TestRunbooks(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(root, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, a := range Alerts() {
		if seen[a.Name] {
			t.Errorf("alert %s twice", a.Name)
		}
		seen[a.Name] = true
		if !bytes.Contains(doc, []byte("\n### "+a.Name+"\n")) {
			t.Errorf("docs/operations.md has no runbook section \"### %s\"", a.Name)
		}
		if a.Severity != "critical" && a.Severity != "warning" {
			t.Errorf("alert %s: severity %q", a.Name, a.Severity)
		}
	}
}

// metricName finds the metric names a query reads.
var metricName = regexp.MustCompile(`\b(concord_[a-z0-9_]+|controller_runtime_[a-z0-9_]+)`)

// TestMetricsDefined checks every concord_* name the queries read is
// one the runtime defines (a string literal in runtime/ or operator/):
// the Prometheus-backed test proves the same for the series it sees,
// this covers the error counters that have no series before their
// first error.
func TestMetricsDefined(t *testing.T) {
	defined := map[string]bool{}
	lit := regexp.MustCompile(`"(concord_[a-z0-9_]+)"`)
	prefix := regexp.MustCompile(`"(concord_[a-z0-9_]+_)"\s*\+`)
	helperName := regexp.MustCompile(`\bc\("([a-z0-9_]+)"`)
	for _, dir := range []string{"runtime", "operator"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, m := range lit.FindAllSubmatch(b, -1) {
				defined[string(m[1])] = true
			}
			// Subsystems that name their counters through a helper,
			// c("name_total", ...) with "concord_<subsystem>_" + name.
			for _, pm := range prefix.FindAllSubmatch(b, -1) {
				for _, m := range helperName.FindAllSubmatch(b, -1) {
					defined[string(pm[1])+string(m[1])] = true
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range AllQueries() {
		for _, name := range metricName.FindAllString(q.Expr, -1) {
			if strings.HasPrefix(name, "controller_runtime_") {
				continue // controller-runtime's own series
			}
			base := name
			for _, suffix := range []string{"_bucket", "_count", "_sum"} {
				if b, ok := strings.CutSuffix(name, suffix); ok && defined[b] {
					base = b
				}
			}
			if !defined[base] {
				t.Errorf("%s reads %s, which no runtime or operator code defines", q.Name, name)
			}
		}
	}
}
