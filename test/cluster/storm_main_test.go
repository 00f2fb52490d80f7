//go:build integration && storm

package cluster

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestMain turns the test binary into a storm client or load balancer
// process when TestReconnectStorm started it as one.
func TestMain(m *testing.M) {
	var run func() error
	switch os.Getenv(stormEnvRole) {
	case "client":
		run = func() error { return runStormClient(os.Stdin, os.Stdout) }
	case "lb":
		run = func() error { return runStormLB(os.Stdin, os.Stdout) }
	default:
		os.Exit(m.Run())
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stdout, "error", strings.ReplaceAll(err.Error(), "\n", " "))
		os.Exit(1)
	}
	os.Exit(0)
}
