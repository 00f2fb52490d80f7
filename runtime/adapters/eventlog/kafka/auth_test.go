package kafka

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
)

// With a username every sarama config the Log builds (the shared client
// and admin, the producer, each consumer group) carries SASL/PLAIN; without
// one none does. TLS follows Config.TLS.
func TestSASLPlainConfig(t *testing.T) {
	// The timings New would fill, so sarama's Validate judges the rest.
	timing := Config{Brokers: []string{"b:9092"}, ClientID: "concord", CommitInterval: time.Second, SessionTimeout: 10 * time.Second}
	withAuth := timing
	withAuth.Username, withAuth.Password, withAuth.TLS = "svc", "s3cret", true
	l := &Log{cfg: withAuth, version: sarama.V4_0_0_0}
	for name, c := range map[string]*sarama.Config{"base": l.baseConfig(), "producer": l.producerConfig(), "consumer": l.consumerConfig()} {
		s := c.Net.SASL
		if !s.Enable || s.Mechanism != sarama.SASLTypePlaintext || !s.Handshake || s.User != "svc" || s.Password != "s3cret" {
			t.Errorf("%s: SASL enable=%t mechanism=%s handshake=%t user=%q", name, s.Enable, s.Mechanism, s.Handshake, s.User)
		}
		if !c.Net.TLS.Enable || c.Net.TLS.Config == nil {
			t.Errorf("%s: TLS not enabled", name)
		}
		if err := c.Validate(); err != nil {
			t.Errorf("%s: sarama rejects the config: %v", name, err)
		}
	}
	plain := &Log{cfg: timing, version: sarama.V4_0_0_0}
	for name, c := range map[string]*sarama.Config{"base": plain.baseConfig(), "producer": plain.producerConfig(), "consumer": plain.consumerConfig()} {
		if c.Net.SASL.Enable || c.Net.TLS.Enable {
			t.Errorf("%s: SASL or TLS enabled without credentials", name)
		}
	}
}

// ParseURL takes user:password from the URL; the password never shows in
// String, %v, slog attributes or ParseURL errors.
func TestKafkaPasswordRedacted(t *testing.T) {
	const pw = "s3cret-pass"
	cfg, err := ParseURL("kafka://svc:" + pw + "@b1:9092,b2:9092?partitions=4")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Username != "svc" || cfg.Password != pw || len(cfg.Brokers) != 2 {
		t.Fatalf("ParseURL: username %q, password set %t, brokers %v", cfg.Username, cfg.Password == pw, cfg.Brokers)
	}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("eventlog", "config", cfg)
	for name, s := range map[string]string{"String": cfg.String(), "%+v": fmt.Sprintf("%+v", cfg), "slog": buf.String()} {
		if strings.Contains(s, pw) || !strings.Contains(s, "svc") || !strings.Contains(s, "xxxxx") {
			t.Errorf("%s should show the user and hide the password: %s", name, s)
		}
	}
	for _, bad := range []string{
		"kafka://svc:" + pw + "@b1:9092?partitions=0",
		"kafka://svc:" + pw + "@b1:port",
		"kfk://svc:" + pw + "@b1:9092",
	} {
		if _, err := ParseURL(bad); err == nil || strings.Contains(err.Error(), pw) {
			t.Errorf("ParseURL(bad URL) error = %v; want an error without the password", err)
		}
	}
}

// A password without a username is a configuration mistake, reported
// before any dial.
func TestPasswordWithoutUsername(t *testing.T) {
	if _, err := New(t.Context(), Config{Brokers: []string{"127.0.0.1:1"}, Password: "x"}); !errors.Is(err, eventlog.ErrInvalid) {
		t.Fatalf("New with a password and no username: %v, want ErrInvalid", err)
	}
}
