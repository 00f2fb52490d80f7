//go:build integration

package conformance

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// jsDir returns the directory `make test` installed discord.js into
// (CONCORD_JS_DIR), failing the test with what to run when it is missing.
func jsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("CONCORD_JS_DIR")
	if dir == "" {
		t.Fatal("CONCORD_JS_DIR is not set: run `make test`, which installs discord.js with npm ci")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "discord.js")); err != nil {
		t.Fatalf("discord.js is not installed in %s (run `make test`): %v", dir, err)
	}
	return dir
}

// startNodeBot runs `node script` in dir with env added; see startBot.
func startNodeBot[T any](t *testing.T, dir, script string, env []string, tap func(T)) <-chan T {
	t.Helper()
	return startBot(t, "discord.js", dir, []string{"node", script}, env, tap)
}

// startBot runs argv in dir with env added and returns every JSON line it
// prints, decoded as T; tap sees each one first. A line
// {"ev":"error",...} fails the test, naming the library lib. Closing the
// bot's stdin stops it at cleanup, and its stderr is logged when the test
// failed.
func startBot[T any](t *testing.T, lib, dir string, argv []string, env []string, tap func(T)) <-chan T {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	stdin, err := cmd.StdinPipe()
	must(t, err, "stdin")
	stdout, err := cmd.StdoutPipe()
	must(t, err, "stdout")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	must(t, cmd.Start(), "start "+argv[0])
	events := make(chan T, 256)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var head struct {
				Ev      string `json:"ev"`
				Message string `json:"message"`
			}
			var e T
			if json.Unmarshal(sc.Bytes(), &head) != nil || json.Unmarshal(sc.Bytes(), &e) != nil {
				continue
			}
			if head.Ev == "error" {
				t.Errorf("%s reported: %s", lib, head.Message)
			}
			if tap != nil {
				tap(e)
			}
			events <- e
		}
	}()
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Wait()
		wg.Wait()
		if t.Failed() {
			t.Logf("%s stderr:\n%s", argv[0], stderr.String())
		}
	})
	return events
}
