// Package concordbin builds the `concord` binary once per test process
// for tests that run it as real processes (test/e2e, test/cluster).
package concordbin

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	once sync.Once
	path string
	err  error
)

// Build builds runtime/cmd/concord the first time it is called and
// returns the same result afterwards; any goroutine may call it (tests
// start it early, in parallel with other setup).
//
// The binary goes to one place per checkout under the user's cache
// directory, not a fresh temporary directory per test process: every
// package's test binary builds it, and temporary copies of a 70 MB
// binary left behind by each run fill a disk. Each build writes a file
// of its own and renames it into place, so test processes building at
// once never see a half-written binary; a process that already started
// the previous one keeps running it.
func Build() (string, error) {
	once.Do(func() {
		dir, e := binDir()
		if e != nil {
			err = e
			return
		}
		tmp, e := os.CreateTemp(dir, "concord-build-*")
		if e != nil {
			err = e
			return
		}
		tmp.Close()
		out, e := exec.Command("go", "build", "-o", tmp.Name(), "github.com/concord-chat/concord/runtime/cmd/concord").CombinedOutput()
		if e != nil {
			os.Remove(tmp.Name())
			err = fmt.Errorf("go build: %v\n%s", e, out)
			return
		}
		path = filepath.Join(dir, "concord")
		if e := os.Rename(tmp.Name(), path); e != nil {
			os.Remove(tmp.Name())
			err = fmt.Errorf("install test binary: %w", e)
		}
	})
	return path, err
}

// binDir is the directory of this checkout's test binary: keyed by the
// module root, so two checkouts never run each other's build.
func binDir() (string, error) {
	root, e := exec.Command("go", "env", "GOMOD").Output()
	if e != nil {
		return "", fmt.Errorf("go env GOMOD: %w", e)
	}
	sum := sha256.Sum256([]byte(filepath.Dir(strings.TrimSpace(string(root)))))
	cache, e := os.UserCacheDir()
	if e != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "concord", "testbin", hex.EncodeToString(sum[:8]))
	if e := os.MkdirAll(dir, 0o755); e != nil {
		return "", fmt.Errorf("test binary dir: %w", e)
	}
	return dir, nil
}

// Path returns the built binary, failing the test when the build failed.
func Path(tb testing.TB) string {
	tb.Helper()
	p, e := Build()
	if e != nil {
		tb.Fatalf("build concord: %v", e)
	}
	return p
}
