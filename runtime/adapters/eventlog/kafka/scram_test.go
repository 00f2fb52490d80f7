package kafka

import (
	"errors"
	"strings"
	"testing"

	"github.com/IBM/sarama"
	"github.com/xdg-go/scram"
)

// TestSCRAMSHA256Vector runs the exchange of RFC 7677 section 3 (user
// "user", password "pencil", fixed client nonce) and checks each client
// message and the server signature (also computed with Python's hashlib).
func TestSCRAMSHA256Vector(t *testing.T) {
	c := &scramClient{hashGen: scram.SHA256, testNonce: "rOprNGfwEbeRWgbNEkqO"}
	if err := c.Begin("user", "pencil", ""); err != nil {
		t.Fatal(err)
	}
	first, err := c.Step("")
	if err != nil || first != "n,,n=user,r=rOprNGfwEbeRWgbNEkqO" {
		t.Fatalf("client-first = %q, %v", first, err)
	}
	final, err := c.Step("r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
	want := "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
	if err != nil || final != want {
		t.Fatalf("client-final = %q, %v; want %q", final, err, want)
	}
	if c.Done() {
		t.Fatal("done before the server's final message")
	}
	if msg, err := c.Step("v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="); err != nil || msg != "" || !c.Done() {
		t.Fatalf("server-final: %q, %v, done %t", msg, err, c.Done())
	}
}

// A wrong server signature, a refusal or a nonce the broker did not
// extend fail the exchange with errors that never hold the password.
func TestSCRAMFailures(t *testing.T) {
	const serverFirst = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
	start := func() *scramClient {
		c := &scramClient{hashGen: scram.SHA256, testNonce: "rOprNGfwEbeRWgbNEkqO"}
		c.Begin("user", "pencil", "")
		c.Step("")
		return c
	}
	c := start()
	c.Step(serverFirst)
	for name, err := range map[string]error{
		"bad signature": func() error { _, err := c.Step("v=AAAA"); return err }(),
		"refused":       func() error { c := start(); c.Step(serverFirst); _, err := c.Step("e=invalid-proof"); return err }(),
		"foreign nonce": func() error { _, err := start().Step("r=someone-else,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"); return err }(),
		"bad count": func() error {
			_, err := start().Step("r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=0")
			return err
		}(),
	} {
		if !errors.Is(err, errSCRAM) || strings.Contains(err.Error(), "pencil") {
			t.Errorf("%s: err = %v, want a SCRAM error without the password", name, err)
		}
	}
	if c.Done() {
		t.Error("done after a bad server signature")
	}
}

// SCRAM mechanisms put sarama's mechanism name and a client generator in
// every config the Log builds, which sarama accepts.
func TestSCRAMConfig(t *testing.T) {
	for _, m := range []string{MechanismSCRAMSHA256, MechanismSCRAMSHA512} {
		l := &Log{cfg: Config{Brokers: []string{"b:9092"}, ClientID: "concord", Username: "svc", Password: "pw", Mechanism: m,
			CommitInterval: 1e9, SessionTimeout: 1e10}, version: sarama.V4_0_0_0}
		for name, c := range map[string]*sarama.Config{"base": l.baseConfig(), "producer": l.producerConfig(), "consumer": l.consumerConfig()} {
			if string(c.Net.SASL.Mechanism) != m || c.Net.SASL.SCRAMClientGeneratorFunc == nil {
				t.Errorf("%s %s: mechanism %s", m, name, c.Net.SASL.Mechanism)
			}
			if err := c.Validate(); err != nil {
				t.Errorf("%s %s: sarama rejects the config: %v", m, name, err)
			}
		}
		if _, ok := l.baseConfig().Net.SASL.SCRAMClientGeneratorFunc().(*scramClient); !ok {
			t.Errorf("%s: generator does not build a scramClient", m)
		}
	}
	if _, err := New(t.Context(), Config{Brokers: []string{"127.0.0.1:1"}, Username: "u", Mechanism: "GSSAPI"}); err == nil || !strings.Contains(err.Error(), "GSSAPI") {
		t.Errorf("New with an unknown mechanism: %v", err)
	}
}

// TestSCRAMSHA512 checks the SHA-512 exchange against values computed
// independently (Python's hashlib and hmac, same inputs as RFC 7677's
// example with another nonce).
func TestSCRAMSHA512(t *testing.T) {
	c := scramGenerator(MechanismSCRAMSHA512)().(*scramClient)
	c.testNonce = "fixednonce123"
	c.Begin("user", "pencil", "")
	if first, _ := c.Step(""); first != "n,,n=user,r=fixednonce123" {
		t.Fatalf("client-first = %q", first)
	}
	final, err := c.Step("r=fixednonce123SERVER,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
	want := "c=biws,r=fixednonce123SERVER,p=YMK173PPxJDVhopqCW0+funeaqtto5oaFbxFm6A9JyffI/ccZrBlcJcJSjAodqz9IKhpPI+QXHLypKL4uY329g=="
	if err != nil || final != want {
		t.Fatalf("client-final = %q, %v; want %q", final, err, want)
	}
	if _, err := c.Step("v=76jGSsDTJXTcdPNMBnKHXf+z520R+7aiNLvSMlK1D9rhW4GqvMHTQWRn4pbnpoGtFuqRuXlHXNq1CdNAfevW3A=="); err != nil || !c.Done() {
		t.Fatalf("server-final: %v, done %t", err, c.Done())
	}
}
