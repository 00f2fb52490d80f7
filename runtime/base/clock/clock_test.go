package clock

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestNowFollowsOffset(t *testing.T) {
	t.Cleanup(func() { SetOffset(0) })
	if d := time.Until(Now()); d > time.Second || d < -time.Second {
		t.Fatalf("offset 0: Now is %v from time.Now", d)
	}
	SetOffset(-45 * time.Second)
	if d := time.Since(Now()); d < 44*time.Second || d > 46*time.Second {
		t.Fatalf("offset -45s: Now is %v behind time.Now", d)
	}
	if was := SetOffset(45 * time.Second); was != -45*time.Second {
		t.Fatalf("SetOffset returned %v, want -45s", was)
	}
	if d := time.Until(Now()); d < 44*time.Second || d > 46*time.Second {
		t.Fatalf("offset +45s: Now is %v ahead of time.Now", d)
	}
}

func TestParseOffset(t *testing.T) {
	for in, want := range map[string]time.Duration{"": 0, " \n": 0, "+45s": 45 * time.Second, "-45s": -45 * time.Second, "1m30s\n": 90 * time.Second, "0": 0} {
		got, err := ParseOffset(in)
		if err != nil || got != want {
			t.Errorf("ParseOffset(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseOffset("45"); err == nil {
		t.Error("ParseOffset(\"45\"): no error for an offset without a unit")
	}
}

func TestFollowMovesTheClockOfARunningProcess(t *testing.T) {
	t.Cleanup(func() { SetOffset(0) })
	file := filepath.Join(t.TempDir(), "clock")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if err := os.WriteFile(file, []byte("+45s"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Follow(ctx, file, 5*time.Millisecond, nil); err != nil {
		t.Fatal(err)
	}
	if Offset() != 45*time.Second {
		t.Fatalf("offset at start %v, want the file's +45s", Offset())
	}
	await := func(want time.Duration) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for Offset() != want {
			if time.Now().After(deadline) {
				t.Fatalf("offset %v, want %v", Offset(), want)
			}
			time.Sleep(5 * time.Millisecond) // Follow polls its file; nothing to await but the offset
		}
	}
	if err := os.WriteFile(file, []byte("-45s"), 0o644); err != nil {
		t.Fatal(err)
	}
	await(-45 * time.Second)
	// A malformed write keeps the offset.
	if err := os.WriteFile(file, []byte("soon"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // ten polls of the file
	if Offset() != -45*time.Second {
		t.Fatalf("a malformed file moved the offset to %v", Offset())
	}
	// A writer that truncates and then writes shows a poll an empty
	// file: it is not an offset of 0.
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // ten polls of the file
	if Offset() != -45*time.Second {
		t.Fatalf("an empty file (a write caught half done) moved the offset to %v", Offset())
	}
	// Removing the file puts the clock right.
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	await(0)
}

func TestFollowRefusesAMalformedFile(t *testing.T) {
	t.Cleanup(func() { SetOffset(0) })
	file := filepath.Join(t.TempDir(), "clock")
	if err := os.WriteFile(file, []byte("later"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Follow(t.Context(), file, 0, nil); err == nil {
		t.Fatal("Follow started on a malformed offset file")
	}
}
