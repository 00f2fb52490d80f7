// Package kafka is the Apache Kafka adapter of the eventlog port, built on
// github.com/IBM/sarama.
//
// Appends go through an idempotent producer with acks=all and one request
// in flight per broker, so a retried batch is neither duplicated nor
// reordered by the broker; Append returns once every record is acknowledged
// by all in-sync replicas. Keys are partitioned with FNV-1a (sarama's hash
// partitioner), as memlog does.
//
// Each Consume call is one member of a Kafka consumer group with its own
// client (so a long JoinGroup or fetch never queues ahead of a produce on a
// shared connection). New groups start at the oldest offset; marks are
// committed about every second, when a generation ends (sarama commits on
// release, before the member rejoins) and by Session.Commit. The broker
// rejects commits from a stale generation, so a member that lost a
// partition in a rebalance cannot move its offset.
//
// Every connection (producer, admin, consumer groups) authenticates the
// same way: SASL PLAIN or SCRAM-SHA-256/512 (scram.go) when
// Config.Username is set, over TLS when Config.TLS is.
package kafka

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
)

// Config configures a Log.
type Config struct {
	// Brokers are bootstrap host:port addresses. Required.
	Brokers []string
	// ClientID names the client to the brokers. Default "concord".
	ClientID string
	// Version is the Kafka protocol version sarama speaks, at most the
	// brokers' version and never below 2.1.0 (Kafka 4 removed the older
	// protocols). Default "4.0.0".
	Version string
	// Partitions is the partition count of topics Append creates.
	// Default 8.
	Partitions int
	// ReplicationFactor of topics this client creates. Default: the
	// brokers' default.replication.factor (KIP-464; 1 with a Version
	// below 2.4.0, which cannot ask for it), so a client left unset on a
	// three-broker cluster configured for replication does not create
	// topics one broker's loss would lose.
	ReplicationFactor int16
	// CommitInterval is how often marked offsets are committed. Default 1s.
	CommitInterval time.Duration
	// SessionTimeout is the consumer group session timeout (the broker
	// allows 6s–300s by default). Default 10s; heartbeats every tenth.
	SessionTimeout time.Duration
	// AppendTimeout bounds one Append. Default 30s.
	AppendTimeout time.Duration
	// Username and Password authenticate every connection (producer,
	// admin and consumer groups) with SASL when Username is set. Default
	// none. The password never appears in String, logs or errors.
	Username, Password string
	// Mechanism is the SASL mechanism used with Username: MechanismPlain,
	// MechanismSCRAMSHA256 or MechanismSCRAMSHA512 (scram.go). Default
	// PLAIN.
	Mechanism string
	// TLS dials the brokers over TLS 1.2+ with the system's roots (SASL/PLAIN
	// sends the password in clear otherwise). Default false.
	TLS bool
	// TopicPrefix, when set, names this cluster's topics and consumer
	// groups on a Kafka that other clusters share: it takes the place of
	// the default "concord." that topic names begin with
	// (eventlog.MessagesTopic "concord.messages" is "acme.messages" with
	// prefix "acme."), is prepended to topics named otherwise, and is
	// prepended to every consumer group. Callers keep using the names
	// without it: records and claims handed to consumers carry them. Empty
	// keeps today's names: topics as given, groups unprefixed.
	TopicPrefix string
	// Logger receives diagnostics. Default slog.Default().
	Logger *slog.Logger
}

// defaultTopicPrefix begins the topic names Concord uses; TopicPrefix
// replaces it.
const defaultTopicPrefix = "concord."

// topicName is the name on the brokers of topic.
func (l *Log) topicName(topic string) string {
	p := l.cfg.TopicPrefix
	if p == "" {
		return topic
	}
	name := p + strings.TrimPrefix(topic, defaultTopicPrefix)
	l.names.Store(name, topic)
	return name
}

// callerTopic is the caller's name of a topic named name on the brokers.
func (l *Log) callerTopic(name string) string {
	if v, ok := l.names.Load(name); ok {
		return v.(string)
	}
	return name
}

// groupName is the name on the brokers of consumer group g.
func (l *Log) groupName(g string) string { return l.cfg.TopicPrefix + g }

// ParseURL reads "kafka://[user:password@]host:port[,host:port...][?partitions=N&client_id=S&version=V&replication=R&topic_prefix=P]"
// into a Config. User and password (percent-encoded) set Username and
// Password. Errors name the URL with its password redacted.
func ParseURL(raw string) (Config, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Config{}, fmt.Errorf("%w: event log url: %v", eventlog.ErrInvalid, urlErr(err))
	}
	raw = u.Redacted()
	if u.Scheme != "kafka" {
		return Config{}, fmt.Errorf("%w: event log url %q: scheme must be kafka", eventlog.ErrInvalid, raw)
	}
	var cfg Config
	for _, h := range strings.Split(u.Host, ",") {
		if _, _, err := net.SplitHostPort(h); err != nil {
			return Config{}, fmt.Errorf("%w: event log url %q: broker %q: %v", eventlog.ErrInvalid, raw, h, err)
		}
		cfg.Brokers = append(cfg.Brokers, h)
	}
	q := u.Query()
	if v := q.Get("partitions"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return Config{}, fmt.Errorf("%w: event log url %q: partitions %q", eventlog.ErrInvalid, raw, v)
		}
		cfg.Partitions = n
	}
	if v := q.Get("replication"); v != "" {
		n, err := strconv.ParseInt(v, 10, 16)
		if err != nil || n <= 0 {
			return Config{}, fmt.Errorf("%w: event log url %q: replication %q", eventlog.ErrInvalid, raw, v)
		}
		cfg.ReplicationFactor = int16(n)
	}
	cfg.ClientID = q.Get("client_id")
	cfg.TopicPrefix = q.Get("topic_prefix")
	if strings.ContainsFunc(cfg.TopicPrefix, func(r rune) bool {
		return !(r == '.' || r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) || len(cfg.TopicPrefix) > 100 {
		return Config{}, fmt.Errorf("%w: event log url %q: topic_prefix %q: only letters, digits, '.', '_' and '-', at most 100", eventlog.ErrInvalid, raw, cfg.TopicPrefix)
	}
	cfg.Version = q.Get("version")
	if u.User != nil {
		cfg.Username = u.User.Username()
		cfg.Password, _ = u.User.Password()
	}
	return cfg, nil
}

// urlErr drops the URL from a *url.Error, which quotes it whole,
// password included, and keeps only what was wrong with it.
func urlErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// String describes the configuration for logs, the password redacted.
func (c Config) String() string {
	pw := ""
	if c.Password != "" {
		pw = "xxxxx"
	}
	return fmt.Sprintf("kafka brokers=%s client_id=%s username=%s password=%s mechanism=%s tls=%t",
		strings.Join(c.Brokers, ","), c.ClientID, c.Username, pw, c.Mechanism, c.TLS)
}

// LogValue implements slog.LogValuer with the password redacted.
func (c Config) LogValue() slog.Value {
	pw := ""
	if c.Password != "" {
		pw = "xxxxx"
	}
	return slog.GroupValue(slog.String("brokers", strings.Join(c.Brokers, ",")), slog.String("client_id", c.ClientID),
		slog.String("username", c.Username), slog.String("password", pw), slog.String("mechanism", c.Mechanism), slog.Bool("tls", c.TLS))
}

// Log is an eventlog.Log on Apache Kafka.
type Log struct {
	cfg      Config
	version  sarama.KafkaVersion
	producer sarama.SyncProducer
	admin    sarama.ClusterAdmin
	client   sarama.Client // metadata and offsets (Inspector)

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc

	mu      sync.Mutex
	closed  bool
	running sync.WaitGroup
	topics  map[string]bool // topics known to exist, by their names on the brokers
	// names maps the brokers' topic names back to the callers' names
	// (TopicPrefix).
	names    sync.Map
	creating sync.Mutex
}

var (
	_ eventlog.Log       = (*Log)(nil)
	_ eventlog.Inspector = (*Log)(nil)
)

// New validates cfg, fills defaults and connects a producer and an admin
// client. It fails with eventlog.ErrUnavailable if no broker answers.
func New(ctx context.Context, cfg Config) (*Log, error) {
	if len(cfg.Brokers) == 0 {
		return nil, fmt.Errorf("%w: kafka: no brokers", eventlog.ErrInvalid)
	}
	if cfg.ClientID == "" {
		cfg.ClientID = "concord"
	}
	if cfg.Version == "" {
		cfg.Version = "4.0.0"
	}
	if cfg.Partitions <= 0 {
		cfg.Partitions = 8
	}
	if cfg.CommitInterval <= 0 {
		cfg.CommitInterval = time.Second
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = 10 * time.Second
	}
	if cfg.AppendTimeout <= 0 {
		cfg.AppendTimeout = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Password != "" && cfg.Username == "" {
		return nil, fmt.Errorf("%w: kafka: a password without a username", eventlog.ErrInvalid)
	}
	cfg.Mechanism = strings.ToUpper(cfg.Mechanism)
	switch cfg.Mechanism {
	case "":
		cfg.Mechanism = MechanismPlain
	case MechanismPlain, MechanismSCRAMSHA256, MechanismSCRAMSHA512:
	default:
		return nil, fmt.Errorf("%w: kafka: SASL mechanism %q (want %s, %s or %s)", eventlog.ErrInvalid,
			cfg.Mechanism, MechanismPlain, MechanismSCRAMSHA256, MechanismSCRAMSHA512)
	}
	v, err := sarama.ParseKafkaVersion(cfg.Version)
	if err != nil {
		return nil, fmt.Errorf("%w: kafka version %q: %v", eventlog.ErrInvalid, cfg.Version, err)
	}
	if !v.IsAtLeast(sarama.V2_1_0_0) {
		return nil, fmt.Errorf("%w: kafka version %s is below 2.1.0", eventlog.ErrInvalid, v)
	}
	if cfg.ReplicationFactor <= 0 {
		// -1 asks the broker for its default.replication.factor; a fixed
		// 1 here once made every topic unreplicated on a replicated
		// cluster unless the URL said replication=3.
		cfg.ReplicationFactor = -1
		if !v.IsAtLeast(sarama.V2_4_0_0) {
			cfg.ReplicationFactor = 1
		}
	}
	l := &Log{cfg: cfg, version: v, topics: map[string]bool{}}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", eventlog.ErrUnavailable, err)
	}
	l.producer, err = sarama.NewSyncProducer(cfg.Brokers, l.producerConfig())
	if err != nil {
		return nil, fmt.Errorf("%w: kafka producer: %v", eventlog.ErrUnavailable, err)
	}
	l.client, err = sarama.NewClient(cfg.Brokers, l.baseConfig())
	if err != nil {
		l.producer.Close()
		return nil, fmt.Errorf("%w: kafka client: %v", eventlog.ErrUnavailable, err)
	}
	// The admin shares the client and closes it.
	l.admin, err = sarama.NewClusterAdminFromClient(l.client)
	if err != nil {
		l.producer.Close()
		l.client.Close()
		return nil, fmt.Errorf("%w: kafka admin: %v", eventlog.ErrUnavailable, err)
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	return l, nil
}

func (l *Log) baseConfig() *sarama.Config {
	c := sarama.NewConfig()
	c.ClientID = l.cfg.ClientID
	c.Version = l.version
	c.Metadata.AllowAutoTopicCreation = false
	c.Net.DialTimeout = 10 * time.Second
	if l.cfg.Username != "" {
		c.Net.SASL.Enable = true
		c.Net.SASL.Mechanism = sarama.SASLTypePlaintext
		if m := l.cfg.Mechanism; m == MechanismSCRAMSHA256 || m == MechanismSCRAMSHA512 {
			c.Net.SASL.Mechanism = sarama.SASLMechanism(m)
			c.Net.SASL.SCRAMClientGeneratorFunc = scramGenerator(m)
		}
		c.Net.SASL.Handshake = true
		c.Net.SASL.User = l.cfg.Username
		c.Net.SASL.Password = l.cfg.Password
	}
	if l.cfg.TLS {
		c.Net.TLS.Enable = true
		c.Net.TLS.Config = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return c
}

func (l *Log) producerConfig() *sarama.Config {
	c := l.baseConfig()
	c.Producer.Idempotent = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Net.MaxOpenRequests = 1
	c.Producer.Retry.Max = 10
	c.Producer.Retry.Backoff = 100 * time.Millisecond
	c.Producer.Return.Successes = true
	c.Producer.Return.Errors = true
	c.Producer.Partitioner = sarama.NewHashPartitioner
	c.Producer.Timeout = 10 * time.Second
	c.Producer.Flush.Frequency = time.Millisecond
	return c
}

func (l *Log) consumerConfig() *sarama.Config {
	c := l.baseConfig()
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.Offsets.AutoCommit.Enable = true
	c.Consumer.Offsets.AutoCommit.Interval = l.cfg.CommitInterval
	c.Consumer.Group.Session.Timeout = l.cfg.SessionTimeout
	c.Consumer.Group.Heartbeat.Interval = l.cfg.SessionTimeout / 10
	c.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRoundRobin()}
	c.Consumer.Return.Errors = true
	c.Consumer.MaxWaitTime = 250 * time.Millisecond
	return c
}

func (l *Log) enter() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return eventlog.ErrClosed
	}
	l.running.Add(1)
	return nil
}

// EnsureTopic implements eventlog.Log. It waits until the topic's
// partitions have leaders.
func (l *Log) EnsureTopic(ctx context.Context, topic string, partitions int) error {
	if topic == "" || partitions <= 0 {
		return fmt.Errorf("%w: topic %q with %d partitions", eventlog.ErrInvalid, topic, partitions)
	}
	return l.ensureTopic(ctx, l.topicName(topic), partitions)
}

// ensureTopic is EnsureTopic for the topic's name on the brokers.
func (l *Log) ensureTopic(ctx context.Context, topic string, partitions int) error {
	if err := l.enter(); err != nil {
		return err
	}
	defer l.running.Done()
	l.mu.Lock()
	known := l.topics[topic]
	l.mu.Unlock()
	if known {
		return nil
	}
	l.creating.Lock()
	defer l.creating.Unlock()
	err := l.admin.CreateTopic(topic, &sarama.TopicDetail{
		NumPartitions:     int32(partitions),
		ReplicationFactor: l.cfg.ReplicationFactor,
	}, false)
	if err != nil && !errors.Is(err, sarama.ErrTopicAlreadyExists) {
		return fmt.Errorf("%w: create topic %q: %v", eventlog.ErrUnavailable, topic, err)
	}
	// Wait until the topic's metadata shows every partition with a leader.
	for backoff := 20 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		md, err := l.admin.DescribeTopics([]string{topic})
		if err == nil && len(md) == 1 && md[0].Err == sarama.ErrNoError && len(md[0].Partitions) > 0 {
			ready := true
			for _, p := range md[0].Partitions {
				ready = ready && p.Err == sarama.ErrNoError && p.Leader >= 0
			}
			if ready {
				break
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: topic %q not ready: %v", eventlog.ErrUnavailable, topic, ctx.Err())
		case <-time.After(backoff):
		}
	}
	l.mu.Lock()
	l.topics[topic] = true
	l.mu.Unlock()
	return nil
}

// Append implements eventlog.Log. If ctx ends first Append returns
// ErrUnavailable while the send may still complete (at-least-once).
func (l *Log) Append(ctx context.Context, records ...eventlog.Record) error {
	if err := l.enter(); err != nil {
		return err
	}
	defer l.running.Done()
	msgs := make([]*sarama.ProducerMessage, len(records))
	for i, r := range records {
		if r.Topic == "" {
			return fmt.Errorf("%w: record without topic", eventlog.ErrInvalid)
		}
		topic := l.topicName(r.Topic)
		l.mu.Lock()
		known := l.topics[topic]
		l.mu.Unlock()
		if !known {
			if err := l.ensureTopic(ctx, topic, l.cfg.Partitions); err != nil {
				return err
			}
		}
		msgs[i] = &sarama.ProducerMessage{Topic: topic, Key: sarama.ByteEncoder(r.Key), Value: sarama.ByteEncoder(r.Value)}
	}
	ctx, cancel := context.WithTimeout(ctx, l.cfg.AppendTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- l.producer.SendMessages(msgs) }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("%w: append %d records: %v", eventlog.ErrUnavailable, len(msgs), err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: append %d records: %v", eventlog.ErrUnavailable, len(msgs), ctx.Err())
	}
}

// Close implements eventlog.Log: it stops consumers (which commit their
// marks and leave their groups), then closes the producer and admin.
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
	var errs []error
	if err := l.producer.Close(); err != nil {
		errs = append(errs, err)
	}
	if err := l.admin.Close(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("kafka: close: %v", err)
	}
	return nil
}

// End implements eventlog.Inspector with the newest offset of each
// partition (the high watermark).
func (l *Log) End(ctx context.Context, topic string) ([]int64, error) {
	if err := l.enter(); err != nil {
		return nil, err
	}
	defer l.running.Done()
	topic = l.topicName(topic)
	if err := l.client.RefreshMetadata(topic); err != nil {
		return nil, fmt.Errorf("%w: metadata of %q: %v", eventlog.ErrUnavailable, topic, err)
	}
	parts, err := l.client.Partitions(topic)
	if err != nil {
		return nil, fmt.Errorf("%w: partitions of %q: %v", eventlog.ErrUnavailable, topic, err)
	}
	out := make([]int64, len(parts))
	for _, p := range parts {
		if int(p) >= len(out) {
			return nil, fmt.Errorf("%w: topic %q has partition %d of %d", eventlog.ErrUnavailable, topic, p, len(parts))
		}
		off, err := l.newest(ctx, topic, p)
		if err != nil {
			return nil, fmt.Errorf("%w: end of %s/%d: %v", eventlog.ErrUnavailable, topic, p, err)
		}
		out[p] = off
	}
	return out, nil
}

// endRetryFor bounds how long End waits for a partition's leader.
const endRetryFor = 15 * time.Second

// newest reads partition p's high watermark. A topic created a moment
// ago (the live roles create theirs at start) has no leader every broker
// agrees on yet: until it has, the broker answers "not the leader" or
// "leader not available", so those answers are retried with fresh
// metadata, backing off, for up to endRetryFor.
func (l *Log) newest(ctx context.Context, topic string, p int32) (int64, error) {
	deadline := time.Now().Add(endRetryFor)
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		off, err := l.client.GetOffset(topic, p, sarama.OffsetNewest)
		if err == nil || !leaderMoving(err) || time.Now().After(deadline) {
			return off, err
		}
		_ = l.client.RefreshMetadata(topic)
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// leaderMoving reports whether err is a broker's answer while a
// partition's leadership is being settled.
func leaderMoving(err error) bool {
	return errors.Is(err, sarama.ErrNotLeaderForPartition) || errors.Is(err, sarama.ErrLeaderNotAvailable) ||
		errors.Is(err, sarama.ErrUnknownTopicOrPartition)
}

// Committed implements eventlog.Inspector.
func (l *Log) Committed(ctx context.Context, group, topic string) (map[int32]int64, error) {
	if err := l.enter(); err != nil {
		return nil, err
	}
	defer l.running.Done()
	group, topic = l.groupName(group), l.topicName(topic)
	parts, err := l.client.Partitions(topic)
	if err != nil {
		return nil, fmt.Errorf("%w: partitions of %q: %v", eventlog.ErrUnavailable, topic, err)
	}
	resp, err := l.admin.ListConsumerGroupOffsets(group, map[string][]int32{topic: parts})
	if err != nil {
		return nil, fmt.Errorf("%w: offsets of group %q: %v", eventlog.ErrUnavailable, group, err)
	}
	out := map[int32]int64{}
	for _, p := range parts {
		b := resp.GetBlock(topic, p)
		if b == nil || b.Err != sarama.ErrNoError || b.Offset < 0 {
			continue
		}
		out[p] = b.Offset
	}
	return out, nil
}
