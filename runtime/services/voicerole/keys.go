package voicerole

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/concord-chat/concord/runtime/config"
	"github.com/concord-chat/concord/runtime/domain/voice/token"
)

// TokenKeyFile is the dev signing key's file in the data directory.
const TokenKeyFile = "voice-token.key"

// SigningKey is the key the guild signs voice admission tokens with:
// Voice.TokenKey; else, in `concord serve`, one derived from the cluster's
// server key (every guild process derives the same); else the one kept in
// <DataDir>/voice-token.key, created on first start.
func SigningKey(c config.Config, dev bool) (ed25519.PrivateKey, error) {
	if c.Voice.TokenKey != "" {
		k, err := token.ParsePrivateKey(c.Voice.TokenKey)
		if err != nil {
			return nil, fmt.Errorf("voice: --voice-token-key: %w", err)
		}
		return k, nil
	}
	if !dev && c.ServerKey != "" {
		seed := sha256.Sum256([]byte("concord voice token key\x00" + c.ServerKey))
		return ed25519.NewKeyFromSeed(seed[:]), nil
	}
	path := filepath.Join(c.DataDir, TokenKeyFile)
	if b, err := os.ReadFile(path); err == nil {
		k, err := token.ParsePrivateKey(strings.TrimSpace(string(b)))
		if err != nil {
			return nil, fmt.Errorf("voice: %s: %w", path, err)
		}
		return k, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("voice: read token key: %w", err)
	}
	k, err := token.GenerateKey()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("voice: data dir: %w", err)
	}
	// O_EXCL: of two processes sharing a data dir, one writes the key and
	// the other reads it.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return SigningKey(c, dev)
	}
	if err != nil {
		return nil, fmt.Errorf("voice: write token key: %w", err)
	}
	_, werr := f.WriteString(hex.EncodeToString(k.Seed()) + "\n")
	serr := f.Sync()
	if err := errors.Join(werr, serr, f.Close()); err != nil {
		return nil, fmt.Errorf("voice: write token key: %w", err)
	}
	return k, nil
}

// TrustedKeys are the keys an SFU accepts tokens from: Voice.TrustedKeys,
// else the public half of SigningKey.
func TrustedKeys(c config.Config, dev bool) ([]ed25519.PublicKey, error) {
	if len(c.Voice.TrustedKeys) > 0 {
		out := make([]ed25519.PublicKey, 0, len(c.Voice.TrustedKeys))
		for _, s := range c.Voice.TrustedKeys {
			k, err := token.ParsePublicKey(s)
			if err != nil {
				return nil, fmt.Errorf("voice: --voice-trusted-keys: %w", err)
			}
			out = append(out, k)
		}
		return out, nil
	}
	k, err := SigningKey(c, dev)
	if err != nil {
		return nil, err
	}
	return []ed25519.PublicKey{k.Public().(ed25519.PublicKey)}, nil
}
