// Package platform runs `concord dev`: every role in one process. It
// opens the embedded backends (store, id minting, auth, the event log's
// outbox) and builds the roles of runtime/roles (guild actors, read
// states, presence, the REST API and bot platform, voice, live comments)
// through the composition root both commands share (runtime/app: the
// backends, the one role.Build pass, the routes, the lifecycle group),
// and serves them on one HTTP listener with /metrics, /healthz and
// /readyz beside them. Its configuration is runtime/config's; its
// defaults are there.
package platform

import "github.com/concord-chat/concord/runtime/config"

// Config is the process configuration (runtime/config).
type Config = config.Config

// PresenceConfig tunes the presence role (runtime/config).
type PresenceConfig = config.Presence

// EntitlementConfig tunes bot revocation (runtime/config).
type EntitlementConfig = config.Entitlements

// DefaultConfig returns the configuration of `concord dev`: the defaults
// of runtime/config with the dev user on.
func DefaultConfig() Config {
	c := config.Default()
	c.DevUser = true
	return c
}

// withDefaults fills empty fields and validates the rest.
func withDefaults(c Config) (Config, error) { return c.Complete() }

// RedactURL returns a backend URL with its password hidden.
func RedactURL(raw string) string { return config.RedactURL(raw) }
