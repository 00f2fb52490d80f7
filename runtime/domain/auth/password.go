package auth

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"strings"

	"golang.org/x/crypto/argon2"
)

// Params are argon2id cost parameters.
type Params struct {
	// Time is the number of passes (default 2).
	Time uint32
	// MemoryKiB is the memory in KiB (default 19456, OWASP's minimum).
	MemoryKiB uint32
	// Threads is the parallelism (default 1).
	Threads uint8
}

// DefaultParams are OWASP's recommended minimum for argon2id.
var DefaultParams = Params{Time: 2, MemoryKiB: 19 * 1024, Threads: 1}

const (
	saltLen = 16
	keyLen  = 32
)

var b64 = base64.RawStdEncoding

// HashPassword hashes password with argon2id and a random salt, encoded in
// the PHC string format: $argon2id$v=19$m=...,t=...,p=...$salt$hash.
func HashPassword(password string, p Params) (string, error) {
	if p.Time == 0 || p.MemoryKiB == 0 || p.Threads == 0 {
		p = DefaultParams
	}
	salt := make([]byte, saltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("hash password: %w", err)
	}
	key := argon2.IDKey([]byte(password), salt, p.Time, p.MemoryKiB, p.Threads, keyLen)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, p.MemoryKiB, p.Time, p.Threads, b64.EncodeToString(salt), b64.EncodeToString(key)), nil
}

// CheckPassword reports whether password matches the encoded hash: nil on a
// match, ErrWrongPassword on a mismatch, ErrBadHash when the hash is unreadable.
func CheckPassword(encoded, password string) error {
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return ErrBadHash
	}
	var version int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return ErrBadHash
	}
	var p Params
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &p.MemoryKiB, &p.Time, &p.Threads); err != nil ||
		p.MemoryKiB == 0 || p.Time == 0 || p.Threads == 0 {
		return ErrBadHash
	}
	salt, err := b64.DecodeString(parts[4])
	if err != nil {
		return ErrBadHash
	}
	want, err := b64.DecodeString(parts[5])
	if err != nil || len(want) == 0 {
		return ErrBadHash
	}
	got := argon2.IDKey([]byte(password), salt, p.Time, p.MemoryKiB, p.Threads, uint32(len(want)))
	if subtle.ConstantTimeCompare(got, want) != 1 {
		return ErrWrongPassword
	}
	return nil
}
