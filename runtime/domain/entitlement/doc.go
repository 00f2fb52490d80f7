// Package entitlement gives revocation a deadline: every bot
// session's entitlements — the bot's token generation and the guilds
// that install its application — are held as a lease with a short TTL
// (10 s by default) that the gateway node renews from the record of
// truth (a Source: the bot store and the user store), and every change
// that takes something away (uninstall, token reset, narrowed managed
// role) is pushed to every gateway node through the registry (a Bus:
// keys revocations/<bot user id> watched by every node).
//
// A push acts at once: a token reset closes the bot's sessions with 4004
// (not resumable), an uninstall detaches the bot's sessions from the
// guild and sends GUILD_DELETE. A lost push degrades to lease expiry: the
// next renewal reads the Source, sees the same change and acts the same
// way, at most one renewal period later. Narrowed permissions need no
// session action: the guild actors evaluate permissions on every event;
// the push only makes the lease re-read at once.
//
// Outage policy: when renewals cannot reach the Source, existing
// sessions keep running on their last grant until Grace (5 min by
// default) past the lease's expiry, then close with 4000 (the client
// reconnects); while the Source or the push channel is unavailable, new
// bot IDENTIFYs are refused with ErrUnavailable (the gateway answers op 9,
// which every bot library retries after a short random wait).
//
// The Manager is the state machine; Source, Bus and Enforcer are its
// ports. RegistryBus implements Bus over a registry.KVWatcher, MemBus in
// memory; FaultySource and FaultyBus inject latency, errors, lost pushes
// and outages for tests and the brownout measurement.
package entitlement
