// Package concordbin builds the `concord` binary once per test process
// for tests that run it as real processes (test/e2e, test/cluster).
package concordbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	once sync.Once
	path string
	err  error
)

// Build builds runtime/cmd/concord into a temporary directory the first
// time it is called and returns the same result afterwards; any goroutine
// may call it (tests start it early, in parallel with other setup).
func Build() (string, error) {
	once.Do(func() {
		dir, e := os.MkdirTemp("", "concord-test-bin")
		if e != nil {
			err = e
			return
		}
		path = filepath.Join(dir, "concord")
		out, e := exec.Command("go", "build", "-o", path, "github.com/concord-chat/concord/runtime/cmd/concord").CombinedOutput()
		if e != nil {
			err = fmt.Errorf("go build: %v\n%s", e, out)
		}
	})
	return path, err
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
