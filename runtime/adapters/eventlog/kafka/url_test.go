package kafka_test

import (
	"errors"
	"testing"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/adapters/eventlog/kafka"
)

func TestParseURL(t *testing.T) {
	cfg, err := kafka.ParseURL("kafka://127.0.0.1:9092,10.0.0.2:9092?partitions=16&replication=3&version=4.1.0")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Brokers) != 2 || cfg.Brokers[0] != "127.0.0.1:9092" || cfg.Brokers[1] != "10.0.0.2:9092" {
		t.Errorf("brokers %v", cfg.Brokers)
	}
	if cfg.Partitions != 16 || cfg.ReplicationFactor != 3 || cfg.Version != "4.1.0" {
		t.Errorf("cfg %+v", cfg)
	}
	for _, bad := range []string{"redis://x:1", "kafka://nohost", "kafka://h:1?partitions=0", "kafka://h:1?replication=x"} {
		if _, err := kafka.ParseURL(bad); !errors.Is(err, eventlog.ErrInvalid) {
			t.Errorf("ParseURL(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}

func TestNewRejectsOldVersion(t *testing.T) {
	_, err := kafka.New(t.Context(), kafka.Config{Brokers: []string{"127.0.0.1:1"}, Version: "2.0.0"})
	if !errors.Is(err, eventlog.ErrInvalid) {
		t.Fatalf("New with version 2.0.0 = %v, want ErrInvalid", err)
	}
}

func TestParseURLTopicPrefix(t *testing.T) {
	cfg, err := kafka.ParseURL("kafka://127.0.0.1:9092?topic_prefix=acme-prod.")
	if err != nil || cfg.TopicPrefix != "acme-prod." {
		t.Fatalf("topic_prefix: %q, %v", cfg.TopicPrefix, err)
	}
	if cfg, _ := kafka.ParseURL("kafka://127.0.0.1:9092"); cfg.TopicPrefix != "" {
		t.Fatalf("no topic_prefix gave %q", cfg.TopicPrefix)
	}
	for _, bad := range []string{"kafka://h:1?topic_prefix=a/b", "kafka://h:1?topic_prefix=a%20b"} {
		if _, err := kafka.ParseURL(bad); !errors.Is(err, eventlog.ErrInvalid) {
			t.Errorf("ParseURL(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}
