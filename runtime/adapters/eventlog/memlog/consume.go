package memlog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
)

const readBatch = 256

// Consume implements eventlog.Log.
func (l *Log) Consume(ctx context.Context, groupName string, topics []string, h eventlog.Handler) error {
	if groupName == "" || len(topics) == 0 {
		return fmt.Errorf("%w: consume needs a group and topics", eventlog.ErrInvalid)
	}
	for _, t := range topics {
		if _, err := l.topic(t); err != nil {
			return err
		}
	}
	g, err := l.group(groupName)
	if err != nil {
		return err
	}
	if err := l.enter(); err != nil {
		return err
	}
	defer l.running.Done()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(l.ctx, cancel)
	defer stop()

	m := g.join(topics)
	defer g.leave(m)
	for {
		gen, gctx, assign, err := g.await(ctx, m)
		if err != nil {
			break
		}
		err = l.runGeneration(ctx, gctx, g, m, gen, assign, h)
		g.finish(m)
		if err != nil {
			return fmt.Errorf("memlog: group %q: %w", groupName, err)
		}
		if ctx.Err() != nil {
			break
		}
	}
	if l.ctx.Err() != nil {
		return eventlog.ErrClosed
	}
	return nil
}

type session struct {
	g      *group
	member string
	gen    int64
	claims map[string][]int32

	mu    sync.Mutex
	marks map[tpKey]int64
}

func (s *session) MemberID() string           { return s.member }
func (s *session) Generation() int64          { return s.gen }
func (s *session) Claims() map[string][]int32 { return s.claims }

func (s *session) Mark(topic string, partition int32, next int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := tpKey{topic, partition}
	if next > s.marks[k] {
		s.marks[k] = next
	}
}

func (s *session) Commit(ctx context.Context) error {
	s.mu.Lock()
	marks := make(map[tpKey]int64, len(s.marks))
	for k, v := range s.marks {
		marks[k] = v
	}
	s.mu.Unlock()
	return s.g.commit(s.gen, marks)
}

type claim struct {
	topic   string
	part    int32
	initial int64
	records chan eventlog.Record
}

func (c *claim) Topic() string                   { return c.topic }
func (c *claim) Partition() int32                { return c.part }
func (c *claim) InitialOffset() int64            { return c.initial }
func (c *claim) Records() <-chan eventlog.Record { return c.records }

// runGeneration runs one generation of h for member m: Setup, one
// ConsumeClaim per assigned partition, Cleanup, and the final commit.
func (l *Log) runGeneration(ctx, genCtx context.Context, g *group, m *member, gen int64, assign map[string][]int32, h eventlog.Handler) error {
	gctx, cancel := context.WithCancel(genCtx)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()

	s := &session{g: g, member: m.id, gen: gen, claims: assign, marks: map[tpKey]int64{}}
	if err := h.Setup(gctx, s); err != nil {
		return fmt.Errorf("setup: %w", err)
	}

	var (
		wg       sync.WaitGroup
		feeders  sync.WaitGroup
		errMu    sync.Mutex
		firstErr error
	)
	fail := func(err error) {
		errMu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		errMu.Unlock()
		cancel()
	}
	for topic, parts := range assign {
		l.mu.Lock()
		ps := l.topics[topic]
		l.mu.Unlock()
		for _, p := range parts {
			c := &claim{topic: topic, part: p, initial: g.offset(tpKey{topic, p}), records: make(chan eventlog.Record, readBatch)}
			feeders.Add(1)
			go func() {
				defer feeders.Done()
				if err := feed(gctx, ps[p], c); err != nil {
					fail(err)
				}
			}()
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := h.ConsumeClaim(gctx, s, c); err != nil {
					fail(fmt.Errorf("consume %s/%d: %w", topic, p, err))
				}
			}()
		}
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	tick := time.NewTicker(l.cfg.CommitInterval)
	defer tick.Stop()
wait:
	for {
		select {
		case <-done:
			break wait
		case <-tick.C:
			if err := s.Commit(gctx); err != nil {
				l.cfg.Logger.Warn("memlog: periodic commit failed", "group", g.name, "err", err)
			}
		}
	}
	cancel()
	feeders.Wait()
	err := h.Cleanup(gctx, s)
	if cerr := s.Commit(context.Background()); cerr != nil && err == nil {
		err = cerr
	}
	if firstErr != nil {
		return firstErr
	}
	if err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	return nil
}

// feed sends the partition's records from the claim's initial offset on,
// waiting for appends, until ctx is done; it then closes the channel.
func feed(ctx context.Context, p *partition, c *claim) error {
	defer close(c.records)
	next := c.initial
	for {
		bodies, changed, err := p.read(next, readBatch)
		if err != nil {
			if errors.Is(ctx.Err(), context.Canceled) {
				return nil
			}
			return err
		}
		if len(bodies) == 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-changed:
				continue
			}
		}
		for _, b := range bodies {
			key, value, t, err := decodeBody(b)
			if err != nil {
				return fmt.Errorf("%s/%d@%d: %w", c.topic, c.part, next, err)
			}
			r := eventlog.Record{Topic: c.topic, Key: key, Value: value, Partition: c.part, Offset: next, Time: t}
			select {
			case <-ctx.Done():
				return nil
			case c.records <- r:
			}
			next++
		}
	}
}
