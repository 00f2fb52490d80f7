package bots

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net"
	"strings"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

var defaultResolver Resolver = net.DefaultResolver

// keyring holds the keys derived from the server key.
type keyring struct {
	tokenMAC []byte // MACs interaction tokens
	seal     cipher.AEAD
}

// derive returns HMAC-SHA256(key, label): a per-purpose subkey.
func derive(key []byte, label string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(label))
	return m.Sum(nil)
}

func newKeyring(key []byte) keyring {
	block, err := aes.NewCipher(derive(key, "concord bots seal v1"))
	if err != nil {
		panic(err) // a 32-byte key always makes an AES-256 cipher
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	return keyring{tokenMAC: derive(key, "concord bots interaction token v1"), seal: aead}
}

// newKeyPair generates an application's Ed25519 key pair and seals the
// private key; appID is bound into the seal as associated data.
func (k keyring) newKeyPair(appID snowflake.ID) (pub ed25519.PublicKey, sealed []byte, err error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key pair: %w", err)
	}
	nonce := make([]byte, k.seal.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, nil, fmt.Errorf("seal key: %w", err)
	}
	return pub, k.seal.Seal(nonce, nonce, priv.Seed(), []byte(appID.String())), nil
}

// privateKey unseals an application's signing key.
func (k keyring) privateKey(a Application) (ed25519.PrivateKey, error) {
	n := k.seal.NonceSize()
	if len(a.SealedPrivateKey) < n {
		return nil, fmt.Errorf("unseal key of application %d: too short", a.ID)
	}
	seed, err := k.seal.Open(nil, a.SealedPrivateKey[:n], a.SealedPrivateKey[n:], []byte(a.ID.String()))
	if err != nil {
		return nil, fmt.Errorf("unseal key of application %d: %w", a.ID, err)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

var tokenEnc = base64.RawURLEncoding

// newInteractionToken returns a token for interaction id and the MAC to
// store. The token is "aW50ZXJhY3Rpb246" style opaque text:
// base64url("interaction:<id>:") followed by base64url of 32 random bytes.
func (k keyring) newInteractionToken(id snowflake.ID) (token string, mac []byte, err error) {
	var secret [32]byte
	if _, err := rand.Read(secret[:]); err != nil {
		return "", nil, fmt.Errorf("interaction token: %w", err)
	}
	token = tokenEnc.EncodeToString([]byte("interaction:"+id.String()+":")) + "." + tokenEnc.EncodeToString(secret[:])
	return token, k.macToken(token), nil
}

func (k keyring) macToken(token string) []byte {
	m := hmac.New(sha256.New, k.tokenMAC)
	m.Write([]byte(token))
	return m.Sum(nil)
}

// tokenInteraction reads the interaction id out of a token; it does not
// authenticate it (checkToken does).
func tokenInteraction(token string) (snowflake.ID, bool) {
	head, _, ok := strings.Cut(token, ".")
	if !ok {
		return 0, false
	}
	raw, err := tokenEnc.DecodeString(head)
	if err != nil {
		return 0, false
	}
	s, ok := strings.CutPrefix(string(raw), "interaction:")
	if !ok {
		return 0, false
	}
	s, ok = strings.CutSuffix(s, ":")
	if !ok {
		return 0, false
	}
	id, err := snowflake.Parse(s)
	return id, err == nil
}

// checkToken reports whether token is the one minted for in.
func (k keyring) checkToken(in Interaction, token string) bool {
	return len(in.TokenMAC) > 0 && hmac.Equal(in.TokenMAC, k.macToken(token))
}

// InteractionOfToken returns the interaction an interaction token (the
// {token} of /interactions/{id}/{token}/callback and /webhooks/{app}/{token})
// belongs to, without checking the token: routers use it to send the
// request to the node owning the interaction's guild, which checks it.
func InteractionOfToken(token string) (snowflake.ID, bool) { return tokenInteraction(token) }
