package memlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
)

type tpKey struct {
	topic string
	part  int32
}

// A group coordinates its members the way a Kafka group coordinator does:
// a join or a leave ends the current generation, and the next one starts
// with a fresh assignment only after every member has left the old one, so
// two members never own a partition at once.
type group struct {
	name string
	path string // offsets file; empty in memory
	log  *Log

	mu        sync.Mutex
	committed map[tpKey]int64
	members   []*member
	nextID    int
	gen       int64
	running   map[*member]bool // members still in the current generation
	assign    map[*member]map[string][]int32
	genCtx    context.Context
	genCancel context.CancelFunc
	changed   chan struct{} // closed when a generation starts
}

type member struct {
	id      string
	topics  []string
	lastGen int64
}

func (l *Log) group(name string) (*group, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if g, ok := l.groups[name]; ok {
		return g, nil
	}
	g := &group{name: name, log: l, committed: map[tpKey]int64{}, running: map[*member]bool{}, changed: make(chan struct{})}
	if l.cfg.Dir != "" {
		g.path = filepath.Join(l.cfg.Dir, "groups", url.PathEscape(name)+".offsets")
		if err := g.load(); err != nil {
			return nil, err
		}
	}
	l.groups[name] = g
	return g, nil
}

func (g *group) load() error {
	b, err := os.ReadFile(g.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("memlog: read offsets of group %q: %w", g.name, err)
	}
	var m map[string]map[string]int64
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("memlog: decode offsets of group %q: %w", g.name, err)
	}
	for topic, parts := range m {
		for p, off := range parts {
			n, err := strconv.ParseInt(p, 10, 32)
			if err != nil {
				return fmt.Errorf("memlog: bad partition %q in offsets of group %q", p, g.name)
			}
			g.committed[tpKey{topic, int32(n)}] = off
		}
	}
	return nil
}

// persistLocked writes the committed offsets to a temporary file, syncs it
// and renames it over the old one.
func (g *group) persistLocked() error {
	if g.path == "" {
		return nil
	}
	m := map[string]map[string]int64{}
	for k, v := range g.committed {
		if m[k.topic] == nil {
			m[k.topic] = map[string]int64{}
		}
		m[k.topic][strconv.Itoa(int(k.part))] = v
	}
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("memlog: encode offsets: %w", err)
	}
	tmp := g.path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("memlog: write offsets: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("memlog: write offsets: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("memlog: sync offsets: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("memlog: close offsets: %w", err)
	}
	if err := os.Rename(tmp, g.path); err != nil {
		return fmt.Errorf("memlog: replace offsets: %w", err)
	}
	return nil
}

func (g *group) join(topics []string) *member {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.nextID++
	m := &member{id: fmt.Sprintf("%s-%d", g.name, g.nextID), topics: sortedTopics(topics)}
	g.members = append(g.members, m)
	g.rebalanceLocked()
	return m
}

func (g *group) leave(m *member) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, x := range g.members {
		if x == m {
			g.members = append(g.members[:i], g.members[i+1:]...)
			break
		}
	}
	delete(g.running, m)
	g.rebalanceLocked()
}

// rebalanceLocked ends the current generation, or starts the next one if
// no member is still in the current one.
func (g *group) rebalanceLocked() {
	if len(g.running) > 0 {
		g.genCancel()
		return
	}
	g.startLocked()
}

// finish records that m has left generation gen.
func (g *group) finish(m *member) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.running[m] {
		return
	}
	delete(g.running, m)
	if len(g.running) == 0 {
		g.startLocked()
	}
}

func (g *group) startLocked() {
	if g.genCancel != nil {
		g.genCancel()
		g.genCancel = nil
	}
	if len(g.members) == 0 {
		return
	}
	g.gen++
	g.assign = map[*member]map[string][]int32{}
	g.running = map[*member]bool{}
	for _, m := range g.members {
		g.assign[m] = map[string][]int32{}
		g.running[m] = true
	}
	g.assignLocked(g.log.counts(g.members))
	g.genCtx, g.genCancel = context.WithCancel(context.Background())
	close(g.changed)
	g.changed = make(chan struct{})
}

// assignLocked spreads each topic's partitions round-robin over the members
// subscribed to it, in join order.
func (g *group) assignLocked(counts map[string]int) {
	for topic, n := range counts {
		var subs []*member
		for _, m := range g.members {
			if i := sort.SearchStrings(m.topics, topic); i < len(m.topics) && m.topics[i] == topic {
				subs = append(subs, m)
			}
		}
		for p := 0; p < n && len(subs) > 0; p++ {
			m := subs[p%len(subs)]
			g.assign[m][topic] = append(g.assign[m][topic], int32(p))
		}
	}
}

// await waits for a generation that includes m and returns its number,
// context and m's assignment.
func (g *group) await(ctx context.Context, m *member) (int64, context.Context, map[string][]int32, error) {
	for {
		g.mu.Lock()
		if g.gen > m.lastGen && g.running[m] {
			m.lastGen = g.gen
			gen, gctx, a := g.gen, g.genCtx, g.assign[m]
			g.mu.Unlock()
			return gen, gctx, a, nil
		}
		ch := g.changed
		g.mu.Unlock()
		select {
		case <-ctx.Done():
			return 0, nil, nil, ctx.Err()
		case <-ch:
		}
	}
}

// commit merges marks into the committed offsets if gen is still current.
func (g *group) commit(gen int64, marks map[tpKey]int64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if gen != g.gen {
		return fmt.Errorf("%w: commit from generation %d, group %q is at %d", eventlog.ErrInvalid, gen, g.name, g.gen)
	}
	dirty := false
	for k, v := range marks {
		if g.committed[k] != v {
			g.committed[k] = v
			dirty = true
		}
	}
	if !dirty {
		return nil
	}
	return g.persistLocked()
}

func (g *group) offset(k tpKey) int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.committed[k]
}
