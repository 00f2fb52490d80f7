//go:build integration

package web

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/concord-chat/concord/web/internal/bundle"
)

// TestTypeCheck runs the TypeScript compiler over web/src and web/test
// (tsconfig.json: strict, no emit). esbuild only strips types, so without
// this a type error would ship. tsc and Preact's declarations are installed
// into web/node_modules by `make test-deps` (npm ci in web/).
func TestTypeCheck(t *testing.T) {
	tsc := filepath.Join("node_modules", ".bin", "tsc")
	if _, err := os.Stat(tsc); err != nil {
		t.Fatalf("web/%s is missing (%v): run `make test-deps`, which runs npm ci in web/", tsc, err)
	}
	if _, err := os.Stat(filepath.Join("node_modules", "preact", "src", "index.d.ts")); err != nil {
		t.Fatalf("Preact's type declarations are missing from web/node_modules (%v): run `make test-deps`", err)
	}
	// The declarations must describe the Preact that is bundled.
	pkg, err := os.ReadFile(filepath.Join("node_modules", "preact", "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	var meta struct{ Version string }
	if err := json.Unmarshal(pkg, &meta); err != nil {
		t.Fatalf("web/node_modules/preact/package.json: %v", err)
	}
	if meta.Version != bundle.PreactVersion {
		t.Fatalf("web/package.json installs Preact %s's declarations, but web/vendor holds Preact %s: make them the same version", meta.Version, bundle.PreactVersion)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, tsc, "-p", ".", "--pretty", "false").CombinedOutput()
	if err != nil {
		t.Fatalf("tsc -p web found type errors (%v):\n%s", err, out)
	}
}
