package kafka

import (
	"context"
	"fmt"
	"sync"

	"github.com/IBM/sarama"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
)

var _ eventlog.Pinned = (*Log)(nil)

// pinnedProducers holds each Log's producer for AppendTo: the same
// idempotent, acks=all settings as Append's, with a manual partitioner.
// It is created on first use and closed when the Log is (its context
// ends), so Logs that never pin pay nothing.
var pinnedProducers sync.Map // *Log -> *pinnedProducer

type pinnedProducer struct {
	once sync.Once
	p    sarama.SyncProducer
	err  error
}

func (l *Log) pinned() (sarama.SyncProducer, error) {
	v, _ := pinnedProducers.LoadOrStore(l, &pinnedProducer{})
	pp := v.(*pinnedProducer)
	pp.once.Do(func() {
		c := l.producerConfig()
		c.Producer.Partitioner = sarama.NewManualPartitioner
		pp.p, pp.err = sarama.NewSyncProducer(l.cfg.Brokers, c)
		if pp.err != nil {
			pp.err = fmt.Errorf("%w: kafka pinned producer: %v", eventlog.ErrUnavailable, pp.err)
			pinnedProducers.Delete(l)
			return
		}
		go func() {
			<-l.ctx.Done()
			pp.p.Close()
			pinnedProducers.Delete(l)
		}()
	})
	return pp.p, pp.err
}

// Partitions implements eventlog.Pinned.
func (l *Log) Partitions(ctx context.Context, topic string) (int, error) {
	if err := l.enter(); err != nil {
		return 0, err
	}
	defer l.running.Done()
	topic = l.topicName(topic)
	l.mu.Lock()
	known := l.topics[topic]
	l.mu.Unlock()
	if !known {
		if err := l.ensureTopic(ctx, topic, l.cfg.Partitions); err != nil {
			return 0, err
		}
	}
	if err := l.client.RefreshMetadata(topic); err != nil {
		return 0, fmt.Errorf("%w: metadata of %q: %v", eventlog.ErrUnavailable, topic, err)
	}
	parts, err := l.client.Partitions(topic)
	if err != nil {
		return 0, fmt.Errorf("%w: partitions of %q: %v", eventlog.ErrUnavailable, topic, err)
	}
	return len(parts), nil
}

// AppendTo implements eventlog.Pinned. The records go in one
// SendMessages call to one partition, so the broker stores them in order;
// each message's offset is read from its acknowledgement.
func (l *Log) AppendTo(ctx context.Context, topic string, partition int32, records ...eventlog.Record) ([]int64, error) {
	if topic == "" || partition < 0 {
		return nil, fmt.Errorf("%w: topic %q partition %d", eventlog.ErrInvalid, topic, partition)
	}
	if len(records) == 0 {
		return nil, nil
	}
	if err := l.enter(); err != nil {
		return nil, err
	}
	defer l.running.Done()
	topic = l.topicName(topic)
	l.mu.Lock()
	known := l.topics[topic]
	l.mu.Unlock()
	if !known {
		if err := l.ensureTopic(ctx, topic, l.cfg.Partitions); err != nil {
			return nil, err
		}
	}
	p, err := l.pinned()
	if err != nil {
		return nil, err
	}
	msgs := make([]*sarama.ProducerMessage, len(records))
	for i, r := range records {
		msgs[i] = &sarama.ProducerMessage{Topic: topic, Partition: partition, Key: sarama.ByteEncoder(r.Key), Value: sarama.ByteEncoder(r.Value)}
	}
	ctx, cancel := context.WithTimeout(ctx, l.cfg.AppendTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.SendMessages(msgs) }()
	select {
	case err := <-done:
		if err != nil {
			return nil, fmt.Errorf("%w: append %d records to %s/%d: %v", eventlog.ErrUnavailable, len(msgs), topic, partition, err)
		}
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: append %d records to %s/%d: %v", eventlog.ErrUnavailable, len(msgs), topic, partition, ctx.Err())
	}
	out := make([]int64, len(msgs))
	for i, m := range msgs {
		if m.Partition != partition {
			return nil, fmt.Errorf("%w: record landed on %s/%d, not %d", eventlog.ErrUnavailable, topic, m.Partition, partition)
		}
		out[i] = m.Offset
	}
	return out, nil
}
