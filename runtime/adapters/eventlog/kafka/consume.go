package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
)

// Consume implements eventlog.Log as one member of a Kafka consumer group.
// Transient group errors (coordinator moves, rebalances) are retried; an
// error from h ends Consume.
func (l *Log) Consume(ctx context.Context, group string, topics []string, h eventlog.Handler) error {
	if group == "" || len(topics) == 0 {
		return fmt.Errorf("%w: consume needs a group and topics", eventlog.ErrInvalid)
	}
	if err := l.enter(); err != nil {
		return err
	}
	defer l.running.Done()
	group = l.groupName(group)
	names := make([]string, len(topics))
	for i, t := range topics {
		names[i] = l.topicName(t)
		if err := l.ensureTopic(ctx, names[i], l.cfg.Partitions); err != nil {
			return err
		}
	}
	topics = names
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(l.ctx, cancel)
	defer stop()

	cg, err := sarama.NewConsumerGroup(l.cfg.Brokers, group, l.consumerConfig())
	if err != nil {
		return fmt.Errorf("%w: join group %q: %v", eventlog.ErrUnavailable, group, err)
	}
	defer cg.Close()
	go func() {
		for err := range cg.Errors() {
			l.cfg.Logger.Warn("kafka consumer group error", "group", group, "err", err)
		}
	}()

	gh := &groupHandler{l: l, h: h, cancel: cancel}
	for backoff := 100 * time.Millisecond; ; {
		err := cg.Consume(ctx, topics, gh)
		if herr := gh.failure(); herr != nil {
			return fmt.Errorf("kafka: group %q: %w", group, herr)
		}
		if ctx.Err() != nil {
			break
		}
		if err == nil {
			backoff = 100 * time.Millisecond
			continue // rebalance: join the next generation
		}
		if errors.Is(err, sarama.ErrClosedConsumerGroup) {
			break
		}
		l.cfg.Logger.Warn("kafka consume failed; retrying", "group", group, "err", err, "backoff", backoff)
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
	if err := cg.Close(); err != nil {
		l.cfg.Logger.Warn("kafka consumer group close", "group", group, "err", err)
	}
	if l.ctx.Err() != nil {
		return eventlog.ErrClosed
	}
	return nil
}

// groupHandler adapts an eventlog.Handler to sarama.
type groupHandler struct {
	l      *Log
	h      eventlog.Handler
	cancel context.CancelFunc

	mu  sync.Mutex
	err error
}

func (g *groupHandler) fail(err error) {
	g.mu.Lock()
	if g.err == nil {
		g.err = err
	}
	g.mu.Unlock()
	g.cancel()
}

func (g *groupHandler) failure() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

func (g *groupHandler) Setup(s sarama.ConsumerGroupSession) error {
	if err := g.h.Setup(s.Context(), session{g.l, s}); err != nil {
		g.fail(fmt.Errorf("setup: %w", err))
		return err
	}
	return nil
}

func (g *groupHandler) Cleanup(s sarama.ConsumerGroupSession) error {
	if err := g.h.Cleanup(s.Context(), session{g.l, s}); err != nil {
		g.fail(fmt.Errorf("cleanup: %w", err))
		return err
	}
	return nil
}

func (g *groupHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	ctx := s.Context()
	cl := &claim{l: g.l, c: c, records: make(chan eventlog.Record, 256)}
	go func() {
		defer close(cl.records)
		for {
			select {
			case <-ctx.Done():
				return
			case m, ok := <-c.Messages():
				if !ok {
					return
				}
				r := eventlog.Record{Topic: g.l.callerTopic(m.Topic), Key: m.Key, Value: m.Value, Partition: m.Partition, Offset: m.Offset, Time: m.Timestamp}
				select {
				case <-ctx.Done():
					return
				case cl.records <- r:
				}
			}
		}
	}()
	err := g.h.ConsumeClaim(ctx, session{g.l, s}, cl)
	if err != nil {
		g.fail(fmt.Errorf("consume %s/%d: %w", c.Topic(), c.Partition(), err))
	}
	// Let the feeder exit if the handler stopped reading early.
	for range cl.records {
	}
	return err
}

// session and claim show the callers' topic names (Config.TopicPrefix).
type session struct {
	l *Log
	s sarama.ConsumerGroupSession
}

func (s session) MemberID() string  { return s.s.MemberID() }
func (s session) Generation() int64 { return int64(s.s.GenerationID()) }
func (s session) Claims() map[string][]int32 {
	out := make(map[string][]int32)
	for t, ps := range s.s.Claims() {
		out[s.l.callerTopic(t)] = ps
	}
	return out
}

func (s session) Mark(topic string, partition int32, next int64) {
	s.s.MarkOffset(s.l.topicName(topic), partition, next, "")
}

func (s session) Commit(ctx context.Context) error {
	s.s.Commit()
	return nil
}

type claim struct {
	l       *Log
	c       sarama.ConsumerGroupClaim
	records chan eventlog.Record
}

func (c *claim) Topic() string                   { return c.l.callerTopic(c.c.Topic()) }
func (c *claim) Partition() int32                { return c.c.Partition() }
func (c *claim) InitialOffset() int64            { return c.c.InitialOffset() }
func (c *claim) Records() <-chan eventlog.Record { return c.records }
