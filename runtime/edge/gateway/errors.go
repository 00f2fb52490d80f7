package gateway

import "errors"

// Sentinel errors a Backend returns from Identify. The node maps each to a
// Discord close code; see Backend.
var (
	// ErrAuthenticationFailed means the token is unknown or revoked (close 4004).
	ErrAuthenticationFailed = errors.New("gateway: authentication failed")
	// ErrInvalidIntents means the intents value has unknown bits (close 4013).
	ErrInvalidIntents = errors.New("gateway: invalid intents")
	// ErrDisallowedIntents means a privileged intent is not enabled for the
	// application (close 4014).
	ErrDisallowedIntents = errors.New("gateway: disallowed intents")
	// ErrInvalidShard means the shard pair is out of range (close 4010).
	ErrInvalidShard = errors.New("gateway: invalid shard")
	// ErrShardingRequired means the session would hold too many guilds
	// (close 4011).
	ErrShardingRequired = errors.New("gateway: sharding required")
	// ErrIdentifyRateLimited means identify admission refused the session
	// for now (max_concurrency per 5 s, or the daily identify budget): the
	// client gets op 9 d:false and identifies again later, as Discord does.
	ErrIdentifyRateLimited = errors.New("gateway: identify rate limited")
)

// Errors returned by Node methods and frame decoding.
var (
	// ErrUnknownSession is returned by SendTo for a session this node does
	// not hold.
	ErrUnknownSession = errors.New("gateway: unknown session")
	// ErrClosed is returned by operations on a closed node.
	ErrClosed = errors.New("gateway: node closed")
	// ErrDecode means a client frame is not a valid gateway payload
	// (close 4002).
	ErrDecode = errors.New("gateway: decode error")
	// ErrUnknownOpcode means a client frame carries an opcode clients may
	// not send (close 4001).
	ErrUnknownOpcode = errors.New("gateway: unknown opcode")
	// ErrInvalidConfig is returned by NewNode for a Config it cannot use.
	ErrInvalidConfig = errors.New("gateway: invalid config")
)
