package main

import (
	"fmt"
	"os"

	"github.com/spf13/pflag"

	"github.com/concord-chat/concord/runtime/config"
)

// bindCredentialFlags registers the backend credentials shared by dev and
// serve: the ones the operator puts in its pods from Secrets
// (CONCORD_CASSANDRA_USERNAME, CONCORD_REDIS_PASSWORD, ...). A user or
// password written in the --store, --redis or --eventlog URL wins over
// these. Defaults are shown as empty in --help, so a password taken from
// the environment is never printed.
func bindCredentialFlags(fs *pflag.FlagSet, cfg *config.Credentials) {
	secret := func(p *string, name, usage string) { secretFlag(fs, p, name, usage) }
	secret(&cfg.CassandraUsername, "cassandra-username", "user name for a cassandra:// --store (PasswordAuthenticator); a user in the URL wins")
	secret(&cfg.CassandraPassword, "cassandra-password", "password for --cassandra-username; a password in the --store URL wins")
	secret(&cfg.RedisPassword, "redis-password", "password for a redis:// --redis (requirepass, or the URL's ACL user); a password in the URL wins")
	secret(&cfg.KafkaUsername, "kafka-username", "SASL user name for a kafka:// --eventlog; a user in the URL wins")
	secret(&cfg.KafkaPassword, "kafka-password", "SASL password for --kafka-username; a password in the URL wins")
	strFlag(fs, &cfg.KafkaSASLMechanism, "kafka-sasl-mechanism", config.Default().KafkaSASLMechanism,
		"SASL mechanism for --kafka-username: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
	boolFlag(fs, &cfg.KafkaTLS, "kafka-tls", false, "dial the Kafka brokers over TLS (system roots); use it with SASL PLAIN, which sends the password in clear")
}

// secretFlag registers a string flag holding a secret, with its
// environment fallback: the environment's value is used without becoming
// the default --help prints.
func secretFlag(fs *pflag.FlagSet, p *string, name, usage string) {
	fs.StringVar(p, name, "", fmt.Sprintf("%s (env %s)", usage, envName(name)))
	// Set after StringVar, which writes the default.
	*p = os.Getenv(envName(name))
}
