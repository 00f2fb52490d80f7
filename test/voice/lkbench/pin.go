//go:build livekit

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// pinnedCommand runs path with args on the CPUs in cpus (a list such as
// "0" or "0,1" or "0-1"): the command is this binary's "pinned" mode,
// which sets its own affinity and then execs path, so every thread of the
// final process (same PID) inherits it. Empty cpus: not pinned.
func pinnedCommand(ctx context.Context, cpus, path string, args ...string) *exec.Cmd {
	if cpus == "" {
		return exec.CommandContext(ctx, path, args...)
	}
	self, err := os.Executable()
	if err != nil {
		return exec.CommandContext(ctx, path, args...)
	}
	return exec.CommandContext(ctx, self, append([]string{"pinned", cpus, path}, args...)...)
}

// execPinned is the "pinned" mode: pinned CPUS PATH ARGS...
func execPinned(args []string) error {
	if len(args) < 2 {
		return errors.New("usage: pinned CPUS PATH [ARGS]")
	}
	var set unix.CPUSet
	for _, f := range strings.Split(args[0], ",") {
		lo, hi, isRange := strings.Cut(f, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return fmt.Errorf("cpu list %q: %w", args[0], err)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				return fmt.Errorf("cpu list %q: %w", args[0], err)
			}
		}
		for c := a; c <= b; c++ {
			set.Set(c)
		}
	}
	// The affinity is per thread; exec keeps only this one.
	runtime.LockOSThread()
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("sched_setaffinity %s: %w", args[0], err)
	}
	return syscall.Exec(args[1], args[1:], os.Environ())
}
