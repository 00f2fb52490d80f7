package token

import (
	"crypto/ed25519"
	"fmt"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// A command is the guild's instruction to an SFU about a user already in
// a call (server mute and deafen, disconnect, a move's leaving half), sent
// to an SFU in another process. It is signed with the admission key, so an
// SFU obeys only the guild tier, with its own prefix, so an admission
// token is never taken for a command nor a command for a token:
// "cc1." + base64url(JSON) + "." + base64url(signature).
const commandPrefix = "cc1."

// CommandTTL is how long a command is valid after it was signed: long
// enough for a retry, short enough that a captured one is soon useless
// (the SFU also refuses its nonce a second time).
const CommandTTL = 30 * time.Second

// Command operations.
const (
	// OpDisconnect drops the user from the call (close 4014).
	OpDisconnect = "disconnect"
	// OpState sets the user's server mute and deafen.
	OpState = "state"
	// OpSelf records the user's self mute and deafen (op 4's self_mute,
	// self_deaf): the SFU keeps them so that a guild rebuilding its voice
	// states from the fleet (OpRoster) gets them back.
	OpSelf = "self"
	// OpRoster asks for the participants of the guild's calls on the
	// server; ChannelID and UserID are zero.
	OpRoster = "roster"
)

// Command is a signed instruction to one SFU.
type Command struct {
	// Server is the SFU the command is for; others refuse it.
	Server    string       `json:"srv"`
	Op        string       `json:"op"`
	GuildID   snowflake.ID `json:"gid"`
	ChannelID snowflake.ID `json:"cid"`
	UserID    snowflake.ID `json:"uid"`
	Mute      bool         `json:"m,omitempty"`
	Deaf      bool         `json:"d,omitempty"`
	// SelfMute and SelfDeaf are OpSelf's.
	SelfMute bool `json:"sm,omitempty"`
	SelfDeaf bool `json:"sd,omitempty"`
	// Issued is when the guild decided (Unix milliseconds): an SFU keeps
	// the latest state per user, so a command overtaken by a newer one
	// changes nothing.
	Issued  int64  `json:"iat"`
	Expires int64  `json:"exp"`
	Nonce   string `json:"n"`
}

// IssuedAt returns Issued as a time.
func (c Command) IssuedAt() time.Time { return time.UnixMilli(c.Issued) }

// ExpiresAt returns Expires as a time.
func (c Command) ExpiresAt() time.Time { return time.UnixMilli(c.Expires) }

// SignCommand returns the wire form of c signed with key. Zero Issued,
// Expires and Nonce become now, now+CommandTTL and a random nonce.
func SignCommand(key ed25519.PrivateKey, c Command, now time.Time) (string, error) {
	if len(key) != ed25519.PrivateKeySize {
		return "", ErrNoKey
	}
	if c.Issued == 0 {
		c.Issued = now.UnixMilli()
	}
	if c.Expires == 0 {
		c.Expires = now.Add(CommandTTL).UnixMilli()
	}
	if c.Nonce == "" {
		n, err := newNonce()
		if err != nil {
			return "", err
		}
		c.Nonce = n
	}
	return seal(key, commandPrefix, "command", c)
}

// VerifyCommand checks cmd's signature and expiry at now and returns it.
func (v Verifier) VerifyCommand(cmd string, now time.Time) (Command, error) {
	var c Command
	if err := v.open(cmd, commandPrefix, "command", &c); err != nil {
		return Command{}, err
	}
	switch {
	case c.Server == "" || c.GuildID == 0 || c.Nonce == "":
		return Command{}, fmt.Errorf("%w: command incomplete", ErrMalformed)
	case c.Op == OpRoster:
		if c.ChannelID != 0 || c.UserID != 0 {
			return Command{}, fmt.Errorf("%w: a roster request names no channel or user", ErrMalformed)
		}
	case c.Op != OpDisconnect && c.Op != OpState && c.Op != OpSelf:
		return Command{}, fmt.Errorf("%w: unknown command %q", ErrMalformed, c.Op)
	case c.ChannelID == 0 || c.UserID == 0:
		return Command{}, fmt.Errorf("%w: command incomplete", ErrMalformed)
	}
	if !now.Before(c.ExpiresAt()) {
		return Command{}, fmt.Errorf("%w at %s", ErrExpired, c.ExpiresAt().UTC().Format(time.RFC3339))
	}
	return c, nil
}

// verify reports whether sig signs msg under one of the trusted keys.
func (v Verifier) verify(msg, sig []byte) bool {
	for _, k := range v.Keys {
		if len(k) == ed25519.PublicKeySize && ed25519.Verify(k, msg, sig) {
			return true
		}
	}
	return false
}
