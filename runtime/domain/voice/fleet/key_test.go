package fleet

import (
	"crypto/ed25519"

	"github.com/concord-chat/concord/runtime/domain/voice/token"
)

func tokenKey() ([]ed25519.PublicKey, error) {
	k, err := token.GenerateKey()
	if err != nil {
		return nil, err
	}
	return []ed25519.PublicKey{k.Public().(ed25519.PublicKey)}, nil
}
