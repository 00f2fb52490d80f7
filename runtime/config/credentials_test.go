package config

import (
	"strings"
	"testing"

	redisctr "github.com/concord-chat/concord/runtime/adapters/counters/redis"
	"github.com/concord-chat/concord/runtime/adapters/eventlog/kafka"
	cassandrastore "github.com/concord-chat/concord/runtime/adapters/store/cassandra"
)

// The flags' credentials fill what a backend URL leaves empty; what the
// URL carries wins.
func TestCredentialPrecedence(t *testing.T) {
	cfg := Credentials{
		CassandraUsername: "flag-user", CassandraPassword: "flag-pw",
		RedisPassword: "flag-pw",
		KafkaUsername: "flag-user", KafkaPassword: "flag-pw", KafkaTLS: true, KafkaSASLMechanism: "SCRAM-SHA-256",
	}

	cc, err := cassandrastore.ParseURL("cassandra://db:9042/ks")
	if err != nil {
		t.Fatal(err)
	}
	cfg.ApplyCassandraAuth(&cc)
	if cc.Username != "flag-user" || cc.Password != "flag-pw" {
		t.Errorf("cassandra without URL credentials: user %q, password from flags %t", cc.Username, cc.Password == "flag-pw")
	}
	cc, _ = cassandrastore.ParseURL("cassandra://url-user:url-pw@db:9042/ks")
	cfg.ApplyCassandraAuth(&cc)
	if cc.Username != "url-user" || cc.Password != "url-pw" {
		t.Errorf("cassandra URL credentials should win: user %q, password from URL %t", cc.Username, cc.Password == "url-pw")
	}

	rc, _ := redisctr.ParseURL("redis://cache:6379")
	cfg.ApplyRedisAuth(&rc)
	if rc.Password != "flag-pw" {
		t.Error("redis without URL password: --redis-password not applied")
	}
	rc, _ = redisctr.ParseURL("redis://app:url-pw@cache:6379")
	cfg.ApplyRedisAuth(&rc)
	if rc.Username != "app" || rc.Password != "url-pw" {
		t.Errorf("redis URL password should win: user %q, password from URL %t", rc.Username, rc.Password == "url-pw")
	}
	rc, _ = redisctr.ParseURL("redis://app@cache:6379")
	cfg.ApplyRedisAuth(&rc)
	if rc.Username != "app" || rc.Password != "flag-pw" {
		t.Errorf("redis URL user without password: user %q, password from flag %t", rc.Username, rc.Password == "flag-pw")
	}

	for _, tc := range []struct{ url, user, pw string }{
		{"kafka://b:9092", "flag-user", "flag-pw"},
		{"kafka://url-user:url-pw@b:9092", "url-user", "url-pw"},
	} {
		kc, err := kafka.ParseURL(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range cfg.EventLogOptions() {
			o(&kc)
		}
		if kc.Username != tc.user || kc.Password != tc.pw || !kc.TLS || kc.Mechanism != kafka.MechanismSCRAMSHA256 {
			t.Errorf("kafka %s: user %q, password %q expected, tls %t", kc.Brokers, kc.Username, tc.pw, kc.TLS)
		}
	}
}

// Errors that name a backend URL redact its password.
func TestBackendURLRedacted(t *testing.T) {
	for _, raw := range []string{"cassandra://u:s3cret@db/ks", "redis://:s3cret@cache:6379", "kafka://u:s3cret@b:9092", "bogus://u:s3cret@x"} {
		if got := RedactURL(raw); strings.Contains(got, "s3cret") || !strings.Contains(got, "xxxxx") {
			t.Errorf("RedactURL(%q) = %q", strings.ReplaceAll(raw, "s3cret", "…"), got)
		}
	}
}
