// Command gen rebuilds web/dist from web/src: `go generate ./web` (or
// `make web`) runs it in the web directory. It replaces every file in
// web/dist, so a renamed bundle leaves no stale copy behind.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/concord-chat/concord/web/internal/bundle"
)

func main() {
	if err := run("."); err != nil {
		fmt.Fprintln(os.Stderr, "web/internal/gen:", err)
		os.Exit(1)
	}
}

func run(webDir string) error {
	files, err := bundle.Build(webDir)
	if err != nil {
		return err
	}
	dist := filepath.Join(webDir, "dist")
	if err := os.RemoveAll(dist); err != nil {
		return fmt.Errorf("clear %s: %w", dist, err)
	}
	for _, f := range files {
		p := filepath.Join(dist, filepath.FromSlash(f.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("mkdir: %w", err)
		}
		if err := os.WriteFile(p, f.Contents, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", p, err)
		}
		fmt.Printf("web/dist/%s\t%d bytes\n", f.Name, len(f.Contents))
	}
	return nil
}
