// Command obsgen writes the chart's generated alert rules and Grafana
// dashboards (package observability) under the repository root given by
// -root (default: the current directory). hack/generate.sh runs it.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/concord-chat/concord/internal/observability"
)

func main() {
	root := flag.String("root", ".", "repository root to write under")
	flag.Parse()
	if err := run(*root); err != nil {
		fmt.Fprintln(os.Stderr, "obsgen:", err)
		os.Exit(1)
	}
}

func run(root string) error {
	files, err := observability.Files()
	if err != nil {
		return err
	}
	dir := filepath.Join(root, observability.DashboardDir)
	// Dashboards removed from the source go from the chart too.
	old, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return err
		}
	}
	for name, b := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return nil
}
