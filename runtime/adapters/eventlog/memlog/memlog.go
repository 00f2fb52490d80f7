// Package memlog is the in-process event log of `concord dev` and unit
// tests: topics with partitions, dense offsets, consumer groups with
// committed offsets and rebalances, with the semantics eventlog documents
// and that eventlog/kafka has.
//
// With a Dir, each partition is an append-only segment file fsynced before
// Append returns, and each group's committed offsets live in a small file
// replaced atomically, so acknowledged records and commits survive a
// restart. Without a Dir everything lives in memory.
package memlog

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"sync"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
)

// Config configures a Log.
type Config struct {
	// Dir holds the log's files. Empty keeps everything in memory.
	Dir string
	// Partitions is the partition count of topics created implicitly.
	// Default 8.
	Partitions int
	// NoSync skips the fsync before Append returns (tests that do not care
	// about power loss). Default false: every acknowledged append is synced.
	NoSync bool
	// CommitInterval is how often marked offsets are committed. Default 1s.
	CommitInterval time.Duration
	// Logger receives diagnostics. Default slog.Default().
	Logger *slog.Logger
}

// Log is an in-process eventlog.Log.
type Log struct {
	cfg Config

	mu      sync.Mutex
	closed  bool
	topics  map[string][]*partition
	groups  map[string]*group
	ctx     context.Context // cancelled by Close
	cancel  context.CancelFunc
	running sync.WaitGroup // Consume calls
}

var _ eventlog.Log = (*Log)(nil)

var validName = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

// New opens (or creates) a log in cfg.Dir and loads its topics.
func New(cfg Config) (*Log, error) {
	if cfg.Partitions <= 0 {
		cfg.Partitions = 8
	}
	if cfg.CommitInterval <= 0 {
		cfg.CommitInterval = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	l := &Log{cfg: cfg, topics: map[string][]*partition{}, groups: map[string]*group{}}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	if cfg.Dir == "" {
		return l, nil
	}
	for _, d := range []string{"topics", "groups"} {
		if err := os.MkdirAll(filepath.Join(cfg.Dir, d), 0o700); err != nil {
			return nil, fmt.Errorf("memlog: create dir: %w", err)
		}
	}
	entries, err := os.ReadDir(filepath.Join(cfg.Dir, "topics"))
	if err != nil {
		return nil, fmt.Errorf("memlog: list topics: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() || !validName.MatchString(e.Name()) {
			continue
		}
		files, err := filepath.Glob(filepath.Join(cfg.Dir, "topics", e.Name(), "*.log"))
		if err != nil || len(files) == 0 {
			continue
		}
		if _, err := l.openTopicLocked(e.Name(), len(files)); err != nil {
			l.Close()
			return nil, err
		}
	}
	return l, nil
}

func (l *Log) openTopicLocked(topic string, n int) ([]*partition, error) {
	if ps, ok := l.topics[topic]; ok {
		return ps, nil
	}
	if !validName.MatchString(topic) {
		return nil, fmt.Errorf("%w: topic %q", eventlog.ErrInvalid, topic)
	}
	ps := make([]*partition, n)
	for i := range ps {
		path := ""
		if l.cfg.Dir != "" {
			dir := filepath.Join(l.cfg.Dir, "topics", topic)
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return nil, fmt.Errorf("memlog: create topic dir: %w", err)
			}
			path = filepath.Join(dir, fmt.Sprintf("%05d.log", i))
		}
		p, err := openPartition(path, !l.cfg.NoSync)
		if err != nil {
			for _, q := range ps[:i] {
				q.close()
			}
			return nil, err
		}
		ps[i] = p
	}
	l.topics[topic] = ps
	return ps, nil
}

// EnsureTopic implements eventlog.Log.
func (l *Log) EnsureTopic(ctx context.Context, topic string, partitions int) error {
	if partitions <= 0 {
		return fmt.Errorf("%w: %d partitions", eventlog.ErrInvalid, partitions)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return eventlog.ErrClosed
	}
	_, err := l.openTopicLocked(topic, partitions)
	return err
}

func (l *Log) topic(name string) ([]*partition, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, eventlog.ErrClosed
	}
	return l.openTopicLocked(name, l.cfg.Partitions)
}

// Append implements eventlog.Log. Records for one partition are written as
// one batch and fsynced once.
func (l *Log) Append(ctx context.Context, records ...eventlog.Record) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %v", eventlog.ErrUnavailable, err)
	}
	type tp struct {
		topic string
		part  int32
	}
	batches := map[tp][][]byte{}
	var order []tp
	now := time.Now()
	for _, r := range records {
		ps, err := l.topic(r.Topic)
		if err != nil {
			return err
		}
		k := tp{r.Topic, eventlog.PartitionFor(r.Key, len(ps))}
		if _, ok := batches[k]; !ok {
			order = append(order, k)
		}
		batches[k] = append(batches[k], encodeBody(r.Key, r.Value, now))
	}
	if err := l.enter(); err != nil {
		return err
	}
	defer l.running.Done()
	for _, k := range order {
		ps, err := l.topic(k.topic)
		if err != nil {
			return err
		}
		if _, err := ps[k.part].append(batches[k]); err != nil {
			return fmt.Errorf("%w: %v", eventlog.ErrUnavailable, err)
		}
	}
	return nil
}

// enter registers a call that uses the files; Close waits for it.
func (l *Log) enter() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return eventlog.ErrClosed
	}
	l.running.Add(1)
	return nil
}

// Close stops every consumer (their Consume returns ErrClosed once the
// generation's marks are committed) and closes the files.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	l.cancel()
	l.running.Wait()
	var first error
	for _, ps := range l.topics {
		for _, p := range ps {
			if err := p.close(); err != nil && first == nil {
				first = fmt.Errorf("memlog: close: %w", err)
			}
		}
	}
	return first
}

var _ eventlog.Inspector = (*Log)(nil)

// Committed implements eventlog.Inspector.
func (l *Log) Committed(ctx context.Context, group, topic string) (map[int32]int64, error) {
	g, err := l.group(group)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[int32]int64{}
	for k, v := range g.committed {
		if k.topic == topic {
			out[k.part] = v
		}
	}
	return out, nil
}

// End implements eventlog.Inspector.
func (l *Log) End(ctx context.Context, topic string) ([]int64, error) {
	l.mu.Lock()
	ps := l.topics[topic]
	l.mu.Unlock()
	out := make([]int64, len(ps))
	for i, p := range ps {
		out[i] = p.length()
	}
	return out, nil
}

func sortedTopics(topics []string) []string {
	t := append([]string(nil), topics...)
	sort.Strings(t)
	return t
}

// counts returns the partition count of every topic the members subscribe
// to.
func (l *Log) counts(members []*member) map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for _, m := range members {
		for _, t := range m.topics {
			out[t] = len(l.topics[t])
		}
	}
	return out
}
