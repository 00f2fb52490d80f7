package topology

import (
	"os"
	"strings"
	"testing"
)

// A port handed out stays the holder's until released, whichever book
// (process) asks next: the lock, not a probe, decides.
func TestPortBookHandsAPortOutOnce(t *testing.T) {
	dir := t.TempDir()
	book := func() *portBook {
		return &portBook{dir: dir, lo: 29000, hi: 29003, free: func(int) bool { return true },
			held: map[string]*os.File{}}
	}
	a, b := book(), book() // two processes' books on one directory
	seen := map[string]bool{}
	for range 2 {
		addr, err := a.take()
		if err != nil {
			t.Fatal(err)
		}
		seen[addr] = true
	}
	last, err := b.take()
	if err != nil {
		t.Fatal(err)
	}
	if seen[last] || len(seen) != 2 {
		t.Fatalf("handed out %v, then %s to another book: a port twice", seen, last)
	}
	if addr, err := b.take(); err == nil || !strings.Contains(err.Error(), "no free loopback port") {
		t.Fatalf("a fourth port from a range of three: %q, %v", addr, err)
	}
	for addr := range seen {
		a.release(addr)
	}
	again, err := b.take()
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	if !seen[again] {
		t.Fatalf("after release got %s, want one of %v", again, seen)
	}
}

// A port somebody has bound is skipped though nobody holds its lock.
func TestPortBookSkipsBoundPorts(t *testing.T) {
	b := &portBook{dir: t.TempDir(), lo: 29000, hi: 29002, free: func(p int) bool { return p == 29001 },
		held: map[string]*os.File{}}
	for range 3 {
		addr, err := b.take()
		if err != nil {
			t.Fatal(err)
		}
		if addr != "127.0.0.1:29001" {
			t.Fatalf("got %s, want the one free port", addr)
		}
		b.release(addr)
	}
}
