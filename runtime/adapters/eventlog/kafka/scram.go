package kafka

import (
	"errors"
	"fmt"

	"github.com/IBM/sarama"
	"github.com/xdg-go/scram"
)

// SASL mechanisms of Config.Mechanism.
const (
	MechanismPlain       = "PLAIN"
	MechanismSCRAMSHA256 = "SCRAM-SHA-256"
	MechanismSCRAMSHA512 = "SCRAM-SHA-512"
)

// errSCRAM prefixes every failure of the exchange; none holds the password.
var errSCRAM = errors.New("kafka: SCRAM")

// scramClient adapts github.com/xdg-go/scram (RFC 5802/7677, with
// SASLprep) to sarama's SCRAMClient: sarama calls Begin, then Step("")
// for the client-first message and Step with each server message until
// Done.
type scramClient struct {
	hashGen scram.HashGeneratorFcn
	conv    *scram.ClientConversation
	// testNonce replaces the random client nonce in tests.
	testNonce string
}

// scramGenerator returns sarama's SCRAMClientGeneratorFunc for mechanism.
func scramGenerator(mechanism string) func() sarama.SCRAMClient {
	h := scram.SHA256
	if mechanism == MechanismSCRAMSHA512 {
		h = scram.SHA512
	}
	return func() sarama.SCRAMClient { return &scramClient{hashGen: h} }
}

// Begin implements sarama.SCRAMClient.
func (c *scramClient) Begin(user, password, authzID string) error {
	client, err := c.hashGen.NewClient(user, password, authzID)
	if err != nil {
		// The library's message names the failing step (SASLprep of the
		// username or password), not the value.
		return fmt.Errorf("%w: %v", errSCRAM, err)
	}
	if c.testNonce != "" {
		client = client.WithNonceGenerator(func() string { return c.testNonce })
	}
	c.conv = client.NewConversation()
	return nil
}

// Step implements sarama.SCRAMClient.
func (c *scramClient) Step(challenge string) (string, error) {
	if c.conv == nil {
		return "", fmt.Errorf("%w: Step before Begin", errSCRAM)
	}
	resp, err := c.conv.Step(challenge)
	if err != nil {
		return "", fmt.Errorf("%w: %v", errSCRAM, err)
	}
	return resp, nil
}

// Done implements sarama.SCRAMClient: true once the server's final
// message was verified (a failed exchange ends with Step's error).
func (c *scramClient) Done() bool { return c.conv != nil && c.conv.Done() && c.conv.Valid() }
