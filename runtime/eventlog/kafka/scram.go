package kafka

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"

	"github.com/IBM/sarama"
)

// SASL mechanisms of Config.Mechanism.
const (
	MechanismPlain       = "PLAIN"
	MechanismSCRAMSHA256 = "SCRAM-SHA-256"
	MechanismSCRAMSHA512 = "SCRAM-SHA-512"
)

// errSCRAM prefixes every failure of the exchange; none holds the password.
var errSCRAM = errors.New("kafka: SCRAM")

// scramClient is a SCRAM client (RFC 5802, RFC 7677) for sarama: sarama
// calls Begin, then Step("") for the client-first message and Step with
// each server message until Done. Channel binding is not used ("n,,").
// The password is used as given (no SASLprep), which is exact for ASCII.
type scramClient struct {
	newHash   func() hash.Hash
	testNonce string // fixed client nonce for tests; empty: random per Begin
	nonce     string

	user, password, authzID string
	step                    int
	clientFirstBare         string
	serverSignature         []byte
	done                    bool
}

var _ sarama.SCRAMClient = (*scramClient)(nil)

// scramGenerator returns sarama's SCRAMClientGeneratorFunc for mechanism.
func scramGenerator(mechanism string) func() sarama.SCRAMClient {
	h := sha256.New
	if mechanism == MechanismSCRAMSHA512 {
		h = sha512.New
	}
	return func() sarama.SCRAMClient { return &scramClient{newHash: h} }
}

// Begin implements sarama.SCRAMClient.
func (c *scramClient) Begin(user, password, authzID string) error {
	c.user, c.password, c.authzID = user, password, authzID
	c.step, c.done, c.nonce = 0, false, c.testNonce
	if c.nonce == "" {
		b := make([]byte, 24)
		if _, err := rand.Read(b); err != nil {
			return fmt.Errorf("%w: nonce: %v", errSCRAM, err)
		}
		c.nonce = base64.RawStdEncoding.EncodeToString(b)
	}
	return nil
}

// Step implements sarama.SCRAMClient.
func (c *scramClient) Step(challenge string) (string, error) {
	c.step++
	switch c.step {
	case 1:
		c.clientFirstBare = "n=" + saslName(c.user) + ",r=" + c.nonce
		return c.gs2Header() + c.clientFirstBare, nil
	case 2:
		return c.clientFinal(challenge)
	case 3:
		attrs := scramAttrs(challenge)
		if e, ok := attrs["e"]; ok {
			return "", fmt.Errorf("%w: the broker refused the credentials: %s", errSCRAM, e)
		}
		v, err := base64.StdEncoding.DecodeString(attrs["v"])
		if err != nil || !hmac.Equal(v, c.serverSignature) {
			return "", fmt.Errorf("%w: the broker's signature does not match (not the server that holds the credentials)", errSCRAM)
		}
		c.done = true
		return "", nil
	}
	return "", fmt.Errorf("%w: unexpected message after the exchange ended", errSCRAM)
}

// Done implements sarama.SCRAMClient.
func (c *scramClient) Done() bool { return c.done }

func (c *scramClient) gs2Header() string {
	if c.authzID == "" {
		return "n,,"
	}
	return "n,a=" + saslName(c.authzID) + ","
}

// clientFinal answers the server-first message with the client proof and
// keeps the signature the server must answer with.
func (c *scramClient) clientFinal(serverFirst string) (string, error) {
	attrs := scramAttrs(serverFirst)
	if e, ok := attrs["e"]; ok {
		return "", fmt.Errorf("%w: the broker refused the exchange: %s", errSCRAM, e)
	}
	nonce, saltB64, iterStr := attrs["r"], attrs["s"], attrs["i"]
	if !strings.HasPrefix(nonce, c.nonce) || len(nonce) == len(c.nonce) {
		return "", fmt.Errorf("%w: the broker's nonce does not extend ours", errSCRAM)
	}
	salt, err := base64.StdEncoding.DecodeString(saltB64)
	if err != nil || len(salt) == 0 {
		return "", fmt.Errorf("%w: bad salt from the broker", errSCRAM)
	}
	iter, err := strconv.Atoi(iterStr)
	if err != nil || iter < 1 {
		return "", fmt.Errorf("%w: bad iteration count %q from the broker", errSCRAM, iterStr)
	}
	size := c.newHash().Size()
	salted, err := pbkdf2.Key(c.newHash, c.password, salt, iter, size)
	if err != nil {
		return "", fmt.Errorf("%w: derive the key: %v", errSCRAM, err)
	}
	clientKey := c.hmac(salted, "Client Key")
	h := c.newHash()
	h.Write(clientKey)
	storedKey := h.Sum(nil)
	withoutProof := "c=" + base64.StdEncoding.EncodeToString([]byte(c.gs2Header())) + ",r=" + nonce
	authMessage := c.clientFirstBare + "," + serverFirst + "," + withoutProof
	proof := c.hmac(storedKey, authMessage)
	for i := range proof {
		proof[i] ^= clientKey[i]
	}
	c.serverSignature = c.hmac(c.hmac(salted, "Server Key"), authMessage)
	return withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof), nil
}

func (c *scramClient) hmac(key []byte, msg string) []byte {
	m := hmac.New(c.newHash, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// saslName escapes "=" and "," in a user or authorization name (RFC 5802).
func saslName(s string) string {
	return strings.NewReplacer("=", "=3D", ",", "=2C").Replace(s)
}

// scramAttrs splits "k=v,k=v" into a map; values may contain "=".
func scramAttrs(msg string) map[string]string {
	m := map[string]string{}
	for _, kv := range strings.Split(msg, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}
