// Package token is the voice admission token: a short-lived grant, signed by
// the guild tier with an Ed25519 key whose public half the voice fleet
// trusts, naming the user, guild, channel, voice server and gateway session
// it admits. An SFU verifies it offline, so admitting a join needs no call
// back to the guild.
//
// Wire form: "cv1." + base64url(JSON claims) + "." + base64url(signature over
// everything before the last dot). Ed25519 rather than a shared HMAC secret
// means a compromised SFU can verify tokens but never mint them.
package token

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// TTL is how long a token admits a join after it was signed.
const TTL = 60 * time.Second

// MaxLen bounds the accepted token length, so Verify never parses a
// megabyte of attacker input.
const MaxLen = 2048

const prefix = "cv1."

// Errors returned by Verify, wrapped with detail.
var (
	ErrMalformed = errors.New("token: malformed")
	ErrSignature = errors.New("token: bad signature")
	ErrExpired   = errors.New("token: expired")
	ErrNoKey     = errors.New("token: no signing key")
)

// Claims is what a token grants.
type Claims struct {
	// UserID is the user admitted.
	UserID snowflake.ID `json:"uid"`
	// GuildID is the guild of the voice channel (identify's server_id).
	GuildID snowflake.ID `json:"gid"`
	// ChannelID is the voice channel: the call the user joins.
	ChannelID snowflake.ID `json:"cid"`
	// Server is the id of the SFU the guild allocated; other SFUs refuse it.
	Server string `json:"srv"`
	// SessionID is the user's chat-gateway session id (identify's session_id).
	SessionID string `json:"sid"`
	// Expires is when the token stops admitting joins (Unix milliseconds).
	Expires int64 `json:"exp"`
	// Nonce makes every token unique, so an SFU can refuse a replay.
	Nonce string `json:"n"`
	// Mute and Deaf are the user's server mute and deafen when the token
	// was signed: the SFU applies them from the first packet, so a muted
	// user who joins (or follows a failover) is never heard.
	Mute bool `json:"m,omitempty"`
	Deaf bool `json:"d,omitempty"`
	// SelfMute and SelfDeaf are the user's own mute and deafen (op 4) when
	// the token was signed; the SFU keeps them for the guild's roster.
	SelfMute bool `json:"sm,omitempty"`
	SelfDeaf bool `json:"sd,omitempty"`
}

// ExpiresAt returns Expires as a time.
func (c Claims) ExpiresAt() time.Time { return time.UnixMilli(c.Expires) }

// GenerateKey returns a fresh signing key.
func GenerateKey() (ed25519.PrivateKey, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("token: generate key: %w", err)
	}
	return priv, nil
}

// ParsePrivateKey reads a signing key from the hex form of its 32-byte seed
// (what flags and environment variables carry).
func ParsePrivateKey(s string) (ed25519.PrivateKey, error) {
	seed, err := hex.DecodeString(strings.TrimSpace(s))
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("%w: private key must be %d hex-encoded bytes", ErrMalformed, ed25519.SeedSize)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// ParsePublicKey reads a verification key from its hex form.
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	b, err := hex.DecodeString(strings.TrimSpace(s))
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%w: public key must be %d hex-encoded bytes", ErrMalformed, ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(b), nil
}

// Sign returns the wire form of c signed with key. A zero Expires becomes
// now+TTL and an empty Nonce a random one.
func Sign(key ed25519.PrivateKey, c Claims, now time.Time) (string, error) {
	if len(key) != ed25519.PrivateKeySize {
		return "", ErrNoKey
	}
	if c.Expires == 0 {
		c.Expires = now.Add(TTL).UnixMilli()
	}
	if c.Nonce == "" {
		n, err := newNonce()
		if err != nil {
			return "", err
		}
		c.Nonce = n
	}
	return seal(key, prefix, "claims", c)
}

// Verifier checks tokens against the keys the fleet trusts. More than one
// key lets the guild tier rotate its signing key without a flag day.
type Verifier struct {
	Keys []ed25519.PublicKey
}

// Verify checks tok's signature and expiry at now and returns its claims.
func (v Verifier) Verify(tok string, now time.Time) (Claims, error) {
	c, err := v.VerifySignature(tok)
	if err != nil {
		return Claims{}, err
	}
	if !now.Before(c.ExpiresAt()) {
		return Claims{}, fmt.Errorf("%w at %s", ErrExpired, c.ExpiresAt().UTC().Format(time.RFC3339))
	}
	return c, nil
}

// VerifySignature checks tok's signature only. An SFU uses it to re-check the
// token a resuming client presents again after the admission window passed.
func (v Verifier) VerifySignature(tok string) (Claims, error) {
	var c Claims
	if err := v.open(tok, prefix, "claims", &c); err != nil {
		return Claims{}, err
	}
	if c.UserID == 0 || c.GuildID == 0 || c.ChannelID == 0 || c.Server == "" || c.SessionID == "" || c.Nonce == "" {
		return Claims{}, fmt.Errorf("%w: claims incomplete", ErrMalformed)
	}
	return c, nil
}

// newNonce is a random 96-bit nonce, URL-safe base64.
func newNonce() (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("token: nonce: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// seal encodes v as pfx + base64(JSON) and appends its Ed25519
// signature: the form open reads. what names v in errors.
func seal(key ed25519.PrivateKey, pfx, what string, v any) (string, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("token: encode %s: %w", what, err)
	}
	signed := pfx + base64.RawURLEncoding.EncodeToString(body)
	sig := ed25519.Sign(key, []byte(signed))
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}

// open checks a signed string's form (prefix, base64 body, one Ed25519
// signature by a trusted key) and decodes its body into out, refusing
// unknown fields: the one reader of tokens and commands, which differ in
// prefix so neither can pass for the other. what names the body in
// errors.
func (v Verifier) open(s, pfx, what string, out any) error {
	if len(s) > MaxLen || !strings.HasPrefix(s, pfx) {
		return ErrMalformed
	}
	dot := strings.LastIndexByte(s, '.')
	if dot < len(pfx) {
		return ErrMalformed
	}
	sig, err := base64.RawURLEncoding.DecodeString(s[dot+1:])
	if err != nil || len(sig) != ed25519.SignatureSize {
		return ErrMalformed
	}
	if !v.verify([]byte(s[:dot]), sig) {
		return ErrSignature
	}
	body, err := base64.RawURLEncoding.DecodeString(s[len(pfx):dot])
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrMalformed, what, err)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrMalformed, what, err)
	}
	return nil
}

// FormatPrivateKey is the hex form of key's seed that ParsePrivateKey reads.
func FormatPrivateKey(key ed25519.PrivateKey) string { return hex.EncodeToString(key.Seed()) }

// FormatPublicKey is the hex form of key that ParsePublicKey reads.
func FormatPublicKey(key ed25519.PublicKey) string { return hex.EncodeToString(key) }
