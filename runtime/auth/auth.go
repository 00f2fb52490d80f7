// Package auth issues and verifies Concord's bearer tokens and hashes
// account passwords.
//
// A token is base64url(user id) "." base64url(generation ‖ issued-at) "."
// base64url(HMAC-SHA256(key, first two parts)). Verification is an HMAC and
// a map read: the issuer keeps each user's token generation in memory,
// loaded from the store on first use and bumped by Revoke, which makes
// every token minted before unusable.
package auth

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/concord-chat/concord/runtime/snowflake"
	"github.com/concord-chat/concord/runtime/store"
)

// Config configures an Issuer.
type Config struct {
	// Key signs tokens; required, at least 32 bytes.
	Key []byte
	// Password is the argon2id cost (default DefaultParams).
	Password Params
	// Now returns the current time (default time.Now).
	Now func() time.Time
}

// Issuer mints and verifies tokens. It is safe for concurrent use.
type Issuer struct {
	key   []byte
	users store.Users
	cfg   Config

	mu  sync.RWMutex
	gen map[snowflake.ID]uint32
}

// New validates cfg and returns an Issuer reading token generations from users.
func New(cfg Config, users store.Users) (*Issuer, error) {
	if len(cfg.Key) < 32 {
		return nil, fmt.Errorf("%w: key must be at least 32 bytes, got %d", ErrConfig, len(cfg.Key))
	}
	if users == nil {
		return nil, fmt.Errorf("%w: users store is nil", ErrConfig)
	}
	if cfg.Password.Time == 0 || cfg.Password.MemoryKiB == 0 || cfg.Password.Threads == 0 {
		cfg.Password = DefaultParams
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Issuer{key: append([]byte(nil), cfg.Key...), users: users, cfg: cfg, gen: make(map[snowflake.ID]uint32)}, nil
}

var enc = base64.RawURLEncoding

// decode decodes one part of a token, accepting only its canonical
// encoding: base64 leaves unused low bits in the last character and skips
// CR and LF, so several texts decode to the same bytes; only the one Mint
// writes verifies, and a token has one spelling.
func decode(s string) ([]byte, error) {
	b, err := enc.DecodeString(s)
	if err != nil {
		return nil, err
	}
	if enc.EncodeToString(b) != s {
		return nil, ErrInvalidToken
	}
	return b, nil
}

// Mint returns a new token for u at its current token generation: the
// in-memory one when known (it may be newer than a stale u), else u's.
func (i *Issuer) Mint(u store.User) string {
	i.mu.RLock()
	gen, ok := i.gen[u.ID]
	i.mu.RUnlock()
	if !ok {
		gen = u.TokenGeneration
	}

	var meta [12]byte
	binary.BigEndian.PutUint32(meta[:4], gen)
	binary.BigEndian.PutUint64(meta[4:], uint64(i.cfg.Now().Unix()))
	head := enc.EncodeToString([]byte(u.ID.String())) + "." + enc.EncodeToString(meta[:])
	return head + "." + enc.EncodeToString(i.mac(head))
}

func (i *Issuer) mac(head string) []byte {
	h := hmac.New(sha256.New, i.key)
	h.Write([]byte(head))
	return h.Sum(nil)
}

// Verify checks token and returns its user id. It fails with
// ErrInvalidToken for malformed, forged and revoked tokens and for tokens of
// users that do not exist.
func (i *Issuer) Verify(ctx context.Context, token string) (snowflake.ID, error) {
	first := strings.IndexByte(token, '.')
	last := strings.LastIndexByte(token, '.')
	if first <= 0 || last <= first+1 || last == len(token)-1 {
		return 0, ErrInvalidToken
	}
	sig, err := decode(token[last+1:])
	if err != nil || !hmac.Equal(sig, i.mac(token[:last])) {
		return 0, ErrInvalidToken
	}
	rawID, err := decode(token[:first])
	if err != nil {
		return 0, ErrInvalidToken
	}
	id, err := snowflake.Parse(string(rawID))
	if err != nil {
		return 0, ErrInvalidToken
	}
	meta, err := decode(token[first+1 : last])
	if err != nil || len(meta) != 12 {
		return 0, ErrInvalidToken
	}
	gen, err := i.generation(ctx, id)
	if err != nil {
		return 0, err
	}
	if binary.BigEndian.Uint32(meta[:4]) != gen {
		return 0, ErrInvalidToken
	}
	return id, nil
}

// generation returns a user's current token generation, loading it once.
func (i *Issuer) generation(ctx context.Context, id snowflake.ID) (uint32, error) {
	i.mu.RLock()
	gen, ok := i.gen[id]
	i.mu.RUnlock()
	if ok {
		return gen, nil
	}
	u, err := i.users.GetUser(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return 0, ErrInvalidToken
	}
	if err != nil {
		return 0, fmt.Errorf("load token generation of %d: %w", id, err)
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if g, ok := i.gen[id]; ok {
		return g, nil
	}
	i.gen[id] = u.TokenGeneration
	return u.TokenGeneration, nil
}

// Revoke invalidates every token of userID issued so far by bumping the
// stored generation (durably) and then the in-memory one.
func (i *Issuer) Revoke(ctx context.Context, userID snowflake.ID) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	u, err := i.users.GetUser(ctx, userID)
	if err != nil {
		return fmt.Errorf("revoke tokens of %d: %w", userID, err)
	}
	u.TokenGeneration++
	if err := i.users.PutUser(ctx, u); err != nil {
		return fmt.Errorf("revoke tokens of %d: %w", userID, err)
	}
	i.gen[userID] = u.TokenGeneration
	return nil
}

// HashPassword hashes password with the issuer's argon2id parameters.
func (i *Issuer) HashPassword(password string) (string, error) {
	return HashPassword(password, i.cfg.Password)
}

// CheckPassword checks password against an encoded hash (see CheckPassword).
func (i *Issuer) CheckPassword(encoded, password string) error {
	return CheckPassword(encoded, password)
}

// StripPrefix removes an optional "Bot " or "Bearer " prefix from an
// Authorization header value.
func StripPrefix(h string) string {
	for _, p := range []string{"Bot ", "Bearer "} {
		if len(h) >= len(p) && strings.EqualFold(h[:len(p)], p) {
			return strings.TrimSpace(h[len(p):])
		}
	}
	return strings.TrimSpace(h)
}
