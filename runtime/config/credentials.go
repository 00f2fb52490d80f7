package config

import (
	redisctr "github.com/concord-chat/concord/runtime/adapters/counters/redis"
	eventlogbackend "github.com/concord-chat/concord/runtime/adapters/eventlog/backend"
	cassandrastore "github.com/concord-chat/concord/runtime/adapters/store/cassandra"
)

// Backend credentials (--cassandra-username, --redis-password,
// --kafka-username, ...) reach the adapters here, in one place for every
// role. Precedence: a user or password written in the backend's URL wins;
// a field the URL leaves empty is filled from the flags.

// ApplyCassandraAuth fills cc's Username and Password from the
// configuration where the store URL left them empty.
func (c Credentials) ApplyCassandraAuth(cc *cassandrastore.Config) {
	if cc.Username == "" {
		cc.Username = c.CassandraUsername
	}
	if cc.Password == "" {
		cc.Password = c.CassandraPassword
	}
}

// ApplyRedisAuth fills rc's Password from RedisPassword where the URL gave
// none.
func (c Credentials) ApplyRedisAuth(rc *redisctr.Config) {
	if rc.Password == "" {
		rc.Password = c.RedisPassword
	}
}

// EventLogOptions returns the options that carry the Kafka credentials,
// SASL mechanism and TLS setting to eventlog/backend.Open.
func (c Credentials) EventLogOptions() []eventlogbackend.Option {
	return []eventlogbackend.Option{
		eventlogbackend.WithKafkaAuth(c.KafkaUsername, c.KafkaPassword, c.KafkaTLS),
		eventlogbackend.WithKafkaSASLMechanism(c.KafkaSASLMechanism),
	}
}

// RedactURL returns a backend URL (scheme://user:password@host...) with
// its password replaced by "xxxxx", for errors and logs.
func RedactURL(raw string) string { return cassandrastore.RedactURL(raw) }
