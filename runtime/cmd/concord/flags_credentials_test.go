package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/concord-chat/concord/runtime/config"
)

// bindAll registers the flags dev and serve share on a fresh flag set.
func bindAll(cfg *config.Config) *pflag.FlagSet {
	fs := pflag.NewFlagSet("dev", pflag.ContinueOnError)
	var logFormat, logLevel string
	bindConfigFlags(fs, cfg, &logFormat, &logLevel)
	return fs
}

// The variables the operator sets from Secrets reach config.Config, and
// --help names them without printing their values.
func TestCredentialFlagsFromEnv(t *testing.T) {
	t.Setenv("CONCORD_CASSANDRA_USERNAME", "cass-user")
	t.Setenv("CONCORD_CASSANDRA_PASSWORD", "cass-s3cret")
	t.Setenv("CONCORD_REDIS_PASSWORD", "redis-s3cret")
	t.Setenv("CONCORD_KAFKA_USERNAME", "kafka-user")
	t.Setenv("CONCORD_KAFKA_PASSWORD", "kafka-s3cret")
	t.Setenv("CONCORD_KAFKA_TLS", "true")
	t.Setenv("CONCORD_KAFKA_SASL_MECHANISM", "SCRAM-SHA-512")
	var cfg config.Config
	fs := bindAll(&cfg)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if cfg.CassandraUsername != "cass-user" || cfg.CassandraPassword != "cass-s3cret" || cfg.RedisPassword != "redis-s3cret" ||
		cfg.KafkaUsername != "kafka-user" || cfg.KafkaPassword != "kafka-s3cret" || !cfg.KafkaTLS ||
		cfg.KafkaSASLMechanism != "SCRAM-SHA-512" {
		t.Fatalf("credentials from env: %+v", cfg)
	}
	var help bytes.Buffer
	fs.SetOutput(&help)
	fs.PrintDefaults()
	for _, env := range []string{"CONCORD_CASSANDRA_USERNAME", "CONCORD_CASSANDRA_PASSWORD", "CONCORD_REDIS_PASSWORD",
		"CONCORD_KAFKA_USERNAME", "CONCORD_KAFKA_PASSWORD", "CONCORD_KAFKA_TLS", "CONCORD_KAFKA_SASL_MECHANISM"} {
		if !strings.Contains(help.String(), env) {
			t.Errorf("--help does not name %s", env)
		}
	}
	if strings.Contains(help.String(), "s3cret") {
		t.Fatalf("--help prints a password from the environment:\n%s", help.String())
	}
}

// A flag on the command line wins over the environment.
func TestCredentialFlagsOverrideEnv(t *testing.T) {
	t.Setenv("CONCORD_REDIS_PASSWORD", "from-env")
	var cfg config.Config
	fs := bindAll(&cfg)
	if err := fs.Parse([]string{"--redis-password=from-flag", "--kafka-username=u", "--cassandra-username=c"}); err != nil {
		t.Fatal(err)
	}
	if cfg.RedisPassword != "from-flag" || cfg.KafkaUsername != "u" || cfg.CassandraUsername != "c" || cfg.KafkaTLS ||
		cfg.KafkaSASLMechanism != "PLAIN" {
		t.Fatalf("flags: %+v", cfg)
	}
}

// The TURN secret and credential lifetime the VoiceRegion controller sets
// as CONCORD_VOICE_ICE_* reach config.Voice, and the web client's media
// origins reach config.Config, validated by Complete.
func TestVoiceICEAndMediaFlagsFromEnv(t *testing.T) {
	t.Setenv("CONCORD_VOICE_ICE_SECRET", "turn-s3cret")
	t.Setenv("CONCORD_VOICE_ICE_CREDENTIAL", "turn-passw0rd")
	t.Setenv("CONCORD_VOICE_ICE_CREDENTIAL_TTL", "90m")
	t.Setenv("CONCORD_WEB_MEDIA_ORIGINS", "https://media.example.com,https://*.cdn.example.com")
	var cfg config.Config
	fs := bindAll(&cfg)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if cfg.Voice.ICESecret != "turn-s3cret" || cfg.Voice.ICECredential != "turn-passw0rd" || cfg.Voice.ICECredentialTTL != 90*time.Minute {
		t.Fatalf("voice ICE from env: secret %q ttl %v", cfg.Voice.ICESecret, cfg.Voice.ICECredentialTTL)
	}
	if len(cfg.WebMediaOrigins) != 2 || cfg.WebMediaOrigins[1] != "https://*.cdn.example.com" {
		t.Fatalf("media origins from env: %q", cfg.WebMediaOrigins)
	}
	var help bytes.Buffer
	fs.SetOutput(&help)
	fs.PrintDefaults()
	if strings.Contains(help.String(), "turn-s3cret") || strings.Contains(help.String(), "turn-passw0rd") {
		t.Fatal("--help prints a TURN secret")
	}
	if _, err := (config.Config{WebMediaOrigins: []string{"https://ok.example.com", "https://bad.example.com/path; script-src *"}}).Complete(); err == nil {
		t.Fatal("a media origin that would widen the CSP was accepted")
	}
}
