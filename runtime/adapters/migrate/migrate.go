// Package migrate copies message history from one store to another —
// `concord migrate --from pebble:DIR --to cassandra://HOSTS/KEYSPACE` — in
// parallel by channel-id ranges, with a progress bar, resumable from a
// checkpoint file, and verified by sampled reads from both sides.
//
// The copy goes through the store ports only: the source lists its
// channels (ChannelLister) and pages through each channel's history with
// ListMessages; the destination receives PutMessage calls, which are
// idempotent, so a resumed or repeated copy rewrites rows harmlessly.
// Give the destination its automatic bucket narrowing turned off
// (cassandra.Config.Narrowing.Disabled): a bulk copy writes at a rate no
// channel has live.
//
// Guild state and accounts are not copied (the ports have no way to list
// them); see docs/operations-cassandra.md.
package migrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// ChannelLister enumerates the channels that hold messages.
type ChannelLister interface {
	// MessageChannels returns up to limit ids of channels with at least
	// one message, ascending, each > after and (when before != 0) < before.
	MessageChannels(ctx context.Context, after, before snowflake.ID, limit int) ([]snowflake.ID, error)
}

// Source is a store a migration can read from.
type Source interface {
	store.Messages
	ChannelLister
}

// Config configures a migration.
type Config struct {
	// From is read. Required.
	From Source
	// To is written. Required.
	To store.Messages
	// Ranges is the number of channel-id ranges the id space is cut into
	// (by creation time, from the snowflake epoch to a day from now).
	// Default: 64.
	Ranges int
	// Workers copy ranges in parallel. Default: 8.
	Workers int
	// WritesInFlight bounds each worker's concurrent writes. Default: 32.
	WritesInFlight int
	// Checkpoint is the file progress is saved in (every second and at the
	// end) and resumed from. Default: "" (not resumable).
	Checkpoint string
	// Progress receives the progress bar. Default: nil (none).
	Progress io.Writer
	// ProgressEvery is the progress bar refresh period. Default: 500ms.
	ProgressEvery time.Duration
	// Logger. Default: slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() (Config, error) {
	if c.From == nil || c.To == nil {
		return c, errors.New("migrate: Config needs From and To")
	}
	if c.Ranges <= 0 {
		c.Ranges = 64
	}
	if c.Workers <= 0 {
		c.Workers = 8
	}
	if c.WritesInFlight <= 0 {
		c.WritesInFlight = 32
	}
	if c.ProgressEvery <= 0 {
		c.ProgressEvery = 500 * time.Millisecond
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// Range is a slice [Lo, Hi) of the channel id space and how far its copy
// got: every channel <= Cursor is copied.
type Range struct {
	Lo, Hi snowflake.ID
	Cursor snowflake.ID
	Done   bool
}

// Checkpoint is the resumable state of a migration.
type Checkpoint struct {
	Ranges   []Range
	Channels int64
	Messages int64
}

// Report is what a migration did.
type Report struct {
	// Channels and Messages copied in this run (a resumed run does not
	// count what earlier runs copied).
	Channels, Messages int64
	// Resumed is true when the run continued from a checkpoint.
	Resumed bool
	Took    time.Duration
}

// splitRanges cuts the id space into n ranges of equal time spans.
func splitRanges(n int, now time.Time) []Range {
	first := snowflake.FromTime(time.UnixMilli(snowflake.Epoch))
	last := snowflake.FromTime(now.Add(24 * time.Hour))
	step := (last - first) / snowflake.ID(n)
	out := make([]Range, n)
	for i := range out {
		out[i] = Range{Lo: first + snowflake.ID(i)*step, Hi: first + snowflake.ID(i+1)*step}
	}
	out[0].Lo = 0
	out[n-1].Hi = 0 // unbounded
	return out
}

func loadCheckpoint(path string, n int) (*Checkpoint, bool, error) {
	if path != "" {
		b, err := os.ReadFile(path)
		switch {
		case err == nil:
			var cp Checkpoint
			if err := json.Unmarshal(b, &cp); err != nil {
				return nil, false, fmt.Errorf("migrate: checkpoint %s: %w", path, err)
			}
			if len(cp.Ranges) == 0 {
				return nil, false, fmt.Errorf("migrate: checkpoint %s holds no ranges", path)
			}
			return &cp, true, nil
		case !errors.Is(err, os.ErrNotExist):
			return nil, false, fmt.Errorf("migrate: checkpoint: %w", err)
		}
	}
	return &Checkpoint{Ranges: splitRanges(n, time.Now())}, false, nil
}

func saveCheckpoint(path string, cp Checkpoint) error {
	if path == "" {
		return nil
	}
	b, err := json.MarshalIndent(cp, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o640); err != nil {
		return fmt.Errorf("migrate: save checkpoint: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("migrate: save checkpoint: %w", err)
	}
	return nil
}

// migration is one running copy.
type migration struct {
	cfg Config

	mu sync.Mutex
	cp Checkpoint

	channels, messages atomic.Int64
}

func (m *migration) snapshot() Checkpoint {
	m.mu.Lock()
	defer m.mu.Unlock()
	cp := m.cp
	cp.Ranges = append([]Range(nil), m.cp.Ranges...)
	return cp
}

// Run copies every channel's history from cfg.From to cfg.To. When
// cfg.Checkpoint names an existing file, it continues where that run
// stopped. It returns when everything is copied, or with the first error
// (progress so far saved).
func Run(ctx context.Context, cfg Config) (Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return Report{}, err
	}
	start := time.Now()
	cp, resumed, err := loadCheckpoint(cfg.Checkpoint, cfg.Ranges)
	if err != nil {
		return Report{}, err
	}
	m := &migration{cfg: cfg, cp: *cp}
	if resumed {
		cfg.Logger.Info("resuming migration", "checkpoint", cfg.Checkpoint, "channels", cp.Channels, "messages", cp.Messages)
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	todo := make(chan int, len(cp.Ranges))
	for i, r := range cp.Ranges {
		if !r.Done {
			todo <- i
		}
	}
	close(todo)

	var wg sync.WaitGroup
	errc := make(chan error, cfg.Workers)
	for range cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range todo {
				if err := m.copyRange(ctx, i); err != nil {
					errc <- err
					cancel()
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go m.progress(done, start)
	wg.Wait()
	close(done)
	close(errc)
	err = <-errc
	final := m.snapshot()
	if serr := saveCheckpoint(cfg.Checkpoint, final); serr != nil && err == nil {
		err = serr
	}
	m.drawProgress(start, true)
	rep := Report{Channels: m.channels.Load(), Messages: m.messages.Load(), Resumed: resumed, Took: time.Since(start)}
	if err != nil {
		return rep, fmt.Errorf("migrate: %w (progress saved: rerun to resume)", err)
	}
	cfg.Logger.Info("migration copied", "channels", rep.Channels, "messages", rep.Messages, "took", rep.Took.Round(time.Millisecond))
	return rep, nil
}

// copyRange copies the channels of range i after its cursor.
func (m *migration) copyRange(ctx context.Context, i int) error {
	m.mu.Lock()
	r := m.cp.Ranges[i]
	m.mu.Unlock()
	after := r.Cursor
	if after < r.Lo {
		after = r.Lo - min(r.Lo, 1) // Lo itself is in the range
	}
	for {
		chans, err := m.cfg.From.MessageChannels(ctx, after, r.Hi, 256)
		if err != nil {
			return fmt.Errorf("list channels: %w", err)
		}
		for _, ch := range chans {
			n, err := m.copyChannel(ctx, ch)
			if err != nil {
				return fmt.Errorf("channel %v: %w", ch, err)
			}
			m.channels.Add(1)
			m.mu.Lock()
			m.cp.Ranges[i].Cursor = ch
			m.cp.Channels++
			m.cp.Messages += n
			m.mu.Unlock()
			after = ch
		}
		if len(chans) < 256 {
			break
		}
	}
	m.mu.Lock()
	m.cp.Ranges[i].Done = true
	m.mu.Unlock()
	return nil
}

// copyChannel pages back through ch's history in the source and writes
// every message to the destination, WritesInFlight at a time.
func (m *migration) copyChannel(ctx context.Context, ch snowflake.ID) (int64, error) {
	sem := make(chan struct{}, m.cfg.WritesInFlight)
	var wg sync.WaitGroup
	var firstErr error
	var errOnce sync.Once
	var n int64
	var before snowflake.ID
	for {
		page, err := m.cfg.From.ListMessages(ctx, ch, store.HistoryQuery{Before: before, Limit: 100})
		if err != nil {
			wg.Wait()
			return n, fmt.Errorf("read: %w", err)
		}
		for _, msg := range page {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				if err := m.cfg.To.PutMessage(ctx, msg); err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("write %v: %w", msg.ID, err) })
				}
			}()
		}
		n += int64(len(page))
		m.messages.Add(int64(len(page)))
		if len(page) < 100 {
			break
		}
		before = page[len(page)-1].ID
	}
	wg.Wait()
	return n, firstErr
}

// progress saves the checkpoint every second and redraws the bar.
func (m *migration) progress(done <-chan struct{}, start time.Time) {
	tick := time.NewTicker(m.cfg.ProgressEvery)
	defer tick.Stop()
	lastSave := time.Now()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
			m.drawProgress(start, false)
			if time.Since(lastSave) >= time.Second {
				if err := saveCheckpoint(m.cfg.Checkpoint, m.snapshot()); err != nil {
					m.cfg.Logger.Warn("checkpoint not saved", "err", err)
				}
				lastSave = time.Now()
			}
		}
	}
}

// fraction estimates the share of the id space done.
func fraction(cp Checkpoint, now time.Time) float64 {
	var f float64
	end := snowflake.FromTime(now.Add(24 * time.Hour))
	for _, r := range cp.Ranges {
		switch {
		case r.Done:
			f++
		case r.Cursor > r.Lo:
			hi := r.Hi
			if hi == 0 {
				hi = end
			}
			f += min(1, float64(r.Cursor-r.Lo)/float64(hi-r.Lo))
		}
	}
	return f / float64(len(cp.Ranges))
}

func (m *migration) drawProgress(start time.Time, final bool) {
	if m.cfg.Progress == nil {
		return
	}
	cp := m.snapshot()
	f := fraction(cp, time.Now())
	if final {
		f = 1
		for _, r := range cp.Ranges {
			if !r.Done {
				f = fraction(cp, time.Now())
				break
			}
		}
	}
	const width = 30
	bar := make([]byte, width)
	for i := range bar {
		if float64(i) < f*width {
			bar[i] = '#'
		} else {
			bar[i] = '.'
		}
	}
	done := 0
	for _, r := range cp.Ranges {
		if r.Done {
			done++
		}
	}
	el := time.Since(start)
	rate := float64(m.messages.Load()) / max(el.Seconds(), 0.001)
	end := "\r"
	if final {
		end = "\n"
	}
	fmt.Fprintf(m.cfg.Progress, "[%s] %5.1f%%  ranges %d/%d  channels %d  messages %d  %.0f msg/s  %s%s",
		bar, 100*f, done, len(cp.Ranges), cp.Channels, cp.Messages, rate, el.Round(time.Second), end)
}
