// Package auth issues and verifies Concord's bearer tokens and hashes
// account passwords.
//
// A token is base64url(user id) "." base64url(generation ‖ issued-at) "."
// base64url(HMAC-SHA256(key, first two parts)). Verification is an HMAC and
// a map read: the issuer keeps each user's token generation in memory,
// loaded from the store on first use and bumped by Revoke, which makes
// every token minted before unusable.
//
// Every process of a cluster has its own issuer over the shared store, and
// a Revoke changes only the revoking process's memory, so a kept
// generation is trusted for Config.GenerationTTL and then read again: a
// token revoked on one node stops working on every node within that time.
// A token whose generation is newer than the kept one (minted by another
// node after a revocation there; its MAC proves the key minted it) makes
// the issuer read the generation at once instead of refusing it.
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

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/clock"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Config configures an Issuer.
type Config struct {
	// Key signs tokens; required, at least 32 bytes.
	Key []byte
	// Password is the argon2id cost (default DefaultParams).
	Password Params
	// Now returns the current time (default clock.Now, the fault-testable wall clock).
	Now func() time.Time
	// GenerationTTL is how long a user's token generation read from the
	// store is trusted before it is read again (default
	// DefaultGenerationTTL): the longest a token revoked by another
	// process keeps working here.
	GenerationTTL time.Duration
}

// DefaultGenerationTTL is Config.GenerationTTL's default.
const DefaultGenerationTTL = 5 * time.Second

// kept is a user's token generation and when it was read.
type kept struct {
	gen  uint32
	read time.Time
}

// Issuer mints and verifies tokens. It is safe for concurrent use.
type Issuer struct {
	key   []byte
	users store.Users
	cfg   Config

	mu  sync.RWMutex
	gen map[snowflake.ID]kept
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
		cfg.Now = clock.Now // tokens are checked by other processes
	}
	if cfg.GenerationTTL <= 0 {
		cfg.GenerationTTL = DefaultGenerationTTL
	}
	return &Issuer{key: append([]byte(nil), cfg.Key...), users: users, cfg: cfg, gen: make(map[snowflake.ID]kept)}, nil
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
// newer of u's and the one kept in memory (either may be stale: u read
// before a Revoke here, the kept one before a Revoke elsewhere).
func (i *Issuer) Mint(u store.User) string {
	i.mu.RLock()
	k, ok := i.gen[u.ID]
	i.mu.RUnlock()
	gen := u.TokenGeneration
	if ok && k.gen > gen {
		gen = k.gen
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
	tokenGen := binary.BigEndian.Uint32(meta[:4])
	gen, err := i.generation(ctx, id, tokenGen)
	if err != nil {
		return 0, err
	}
	if tokenGen != gen {
		return 0, ErrInvalidToken
	}
	return id, nil
}

// TokenGeneration reads the token generation a token carries (the first
// four bytes, big-endian, of its middle part), without checking its MAC:
// for a caller that keeps a token it verified and compares the generation
// with the account's. ok is false when token is not shaped like one.
func TokenGeneration(token string) (gen uint32, ok bool) {
	first := strings.IndexByte(token, '.')
	last := strings.LastIndexByte(token, '.')
	if first < 0 || last <= first {
		return 0, false
	}
	meta, err := decode(token[first+1 : last])
	if err != nil || len(meta) != 12 {
		return 0, false
	}
	return binary.BigEndian.Uint32(meta[:4]), true
}

// generation returns a user's current token generation: the kept one while
// it is fresh and not older than the token's (tokenGen), else the store's.
func (i *Issuer) generation(ctx context.Context, id snowflake.ID, tokenGen uint32) (uint32, error) {
	now := i.cfg.Now()
	i.mu.RLock()
	k, ok := i.gen[id]
	i.mu.RUnlock()
	if ok && tokenGen <= k.gen && now.Sub(k.read) < i.cfg.GenerationTTL {
		return k.gen, nil
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
	// A Revoke here while the store was read kept a newer generation.
	if k, ok := i.gen[id]; ok && k.gen > u.TokenGeneration {
		return k.gen, nil
	}
	i.gen[id] = kept{gen: u.TokenGeneration, read: now}
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
	i.gen[userID] = kept{gen: u.TokenGeneration, read: i.cfg.Now()}
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
