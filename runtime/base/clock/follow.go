package clock

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"time"
)

// DefaultFollowEvery is how often Follow reads its file when every is 0.
const DefaultFollowEvery = 100 * time.Millisecond

// ParseOffset reads an offset as the fault file holds it: a Go duration
// with an optional sign ("+45s", "-45s", "1m30s"); empty or blank is 0.
func ParseOffset(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(strings.TrimPrefix(s, "+"))
	if err != nil {
		return 0, fmt.Errorf("clock: offset %q: %w", s, err)
	}
	return d, nil
}

// ReadFile sets the offset from the file at path: its content as
// ParseOffset reads it, and 0 when the file does not exist. It returns
// the offset set.
func ReadFile(path string) (time.Duration, error) {
	return readFile(path, false)
}

// readFile is ReadFile; with keepBlank a blank file keeps the offset: a
// writer that truncates the file and then writes it (os.WriteFile) shows
// a poll an empty file between the two, which is not an offset of 0.
func readFile(path string, keepBlank bool) (time.Duration, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		SetOffset(0)
		return 0, nil
	}
	if err != nil {
		return Offset(), fmt.Errorf("clock: read offset file: %w", err)
	}
	if keepBlank && strings.TrimSpace(string(b)) == "" {
		return Offset(), nil
	}
	d, err := ParseOffset(string(b))
	if err != nil {
		return Offset(), err
	}
	SetOffset(d)
	return d, nil
}

// Follow is the fault-injection path of the seam: it sets the offset
// from the file at path now (failing on an unreadable or malformed file)
// and then every `every` (DefaultFollowEvery when 0) until ctx ends, so a
// fault test moves a running process's clock by writing the file and puts
// it back by writing 0 or removing it. A malformed write is logged and
// the offset kept; so is a blank file after the start (a write caught
// half done). Each change is logged at warn level: a process whose
// clock is moved on purpose should say so.
func Follow(ctx context.Context, path string, every time.Duration, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if every <= 0 {
		every = DefaultFollowEvery
	}
	d, err := ReadFile(path)
	if err != nil {
		return err
	}
	log.Warn("fault clock enabled: the wall clock follows an offset file (fault testing only)", "file", path, "offset", d)
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		last, lastErr := d, ""
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			d, err := readFile(path, true)
			if err != nil {
				if err.Error() != lastErr {
					log.Warn("fault clock: offset file not applied", "file", path, "err", err)
				}
				lastErr = err.Error()
				continue
			}
			lastErr = ""
			if d != last {
				log.Warn("fault clock moved", "file", path, "offset", d, "was", last)
				last = d
			}
		}
	}()
	return nil
}
