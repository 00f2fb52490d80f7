// Package bots is Concord's bot platform core: applications and their bot
// users, installations owned by guilds, application commands and
// interactions.
//
// The Handler serves the Discord-shaped REST routes for these under
// /api/v9 and /api/v10 and talks to the rest of Concord only through the
// small interfaces in deps.go (Guilds, Dispatcher, Messages, Tokens, Doer),
// which the process wiring implements with the guild actors, the gateway
// and the egress client, and through its own storage port (store.go).
//
// Credentials. A bot token is an auth token of the bot user (auth.Issuer):
// an HMAC under the server key over the user id and a token generation.
// No token, hash of a token or anything replayable is stored: verification
// recomputes the MAC, and a reset bumps the generation, which invalidates
// every earlier token at once. This is stronger than salted hashes at rest
// would be (the server key is the salt and lives in a
// Kubernetes Secret, not in the database). Interaction tokens are random
// 32-byte values prefixed with the interaction id; only their HMAC under
// the server key is stored. An application's Ed25519 private key, needed to
// sign deliveries to its interactions endpoint, is stored sealed with
// AES-GCM under a key derived from the server key.
//
// Interactions. A user invokes a command with POST /interactions. The
// interaction goes either to the application's interactions endpoint (a
// signed POST through the egress Doer, retried once inside the window) or
// as INTERACTION_CREATE to the bot's gateway sessions, never both. A timer
// fires at the acknowledgement deadline (3 s): if no callback arrived, the
// invoking user gets an ephemeral "the application did not respond"
// message and concord_bots_interaction_misses_total rises. The token then
// serves followups and @original edits for 15 minutes. Timers live in
// memory: interactions pending when the process stops get no failure
// message (they are session-class state: lost with the process, like a
// session's replay buffer).
//
// Wiring. NewHandler takes a Config (the server key from the Secret, the
// clock, the metrics registerer) and Deps; Register mounts the routes for
// /api/v9 and /api/v10 on a ServeMux. The simplest composition puts the
// core REST API behind the bot routes:
//
//	mux := http.NewServeMux()
//	botsHandler.Register(mux, "")
//	mux.Handle("/", apiHandler) // api keeps its own mux and 404s
//
// Patterns here are more specific than "/", so GET
// /oauth2/applications/@me is served by this package, not the core API.
// The process also calls Handler.Uninstalled when the guild removes a bot
// member, Handler.AllowedIntents at IDENTIFY, Handler.PurgeInteractions
// every few minutes and Handler.Close at shutdown.
package bots
