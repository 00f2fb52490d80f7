package cassandra

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// A username selects the driver's PasswordAuthenticator with the
// credentials; no username means no authenticator.
func TestAuthenticator(t *testing.T) {
	if a := (Config{}).authenticator(); a != nil {
		t.Fatalf("no username: authenticator %T, want none", a)
	}
	a, ok := Config{Username: "concord", Password: "s3cret"}.authenticator().(gocql.PasswordAuthenticator)
	if !ok || a.Username != "concord" || a.Password != "s3cret" {
		t.Fatalf("authenticator = %T %q, want PasswordAuthenticator for concord", a, a.Username)
	}
	if err := (Config{Password: "s3cret"}).validate(); !errors.Is(err, ErrConfig) {
		t.Fatalf("password without username: %v, want ErrConfig", err)
	}
}

// ParseURL reads user:password@ (percent-encoded) before the hosts; the
// password never shows in String, %v, slog attributes or ParseURL errors.
func TestURLCredentials(t *testing.T) {
	const pw = "s3cret/p@ss"
	enc := "s3cret%2Fp%40ss"
	cfg, err := ParseURL("cassandra://concord:" + enc + "@10.0.0.1:9042,10.0.0.2/ks?dc=eu")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Username != "concord" || cfg.Password != pw || len(cfg.Hosts) != 2 || cfg.Hosts[0] != "10.0.0.1:9042" ||
		cfg.Keyspace != "ks" || cfg.DataCenter != "eu" {
		t.Fatalf("ParseURL: %s hosts %v", cfg, cfg.Hosts)
	}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("store", "config", cfg)
	for name, s := range map[string]string{"String": cfg.String(), "%+v": fmt.Sprintf("%+v", cfg), "slog": buf.String()} {
		if strings.Contains(s, pw) || strings.Contains(s, enc) || !strings.Contains(s, "concord") || !strings.Contains(s, "xxxxx") {
			t.Errorf("%s should show the user and hide the password: %s", name, s)
		}
	}
	for _, bad := range []string{
		"cassandra://concord:" + enc + "@h/bad-name",
		"cassandra://concord:" + enc + "@h/ks?rf=0",
		"cassandra://:" + enc + "@h/ks",
		"cassandr://concord:" + enc + "@h/ks",
	} {
		if _, err := ParseURL(bad); !errors.Is(err, ErrConfig) || strings.Contains(err.Error(), enc) || strings.Contains(err.Error(), pw) {
			t.Errorf("ParseURL(bad URL) error = %v; want ErrConfig without the password", err)
		}
	}
	if got := RedactURL("cassandra://u:" + enc + "@h/ks"); got != "cassandra://u:xxxxx@h/ks" {
		t.Errorf("RedactURL = %s", got)
	}
	if got := RedactURL("cassandra://h/ks"); got != "cassandra://h/ks" {
		t.Errorf("RedactURL without credentials = %s", got)
	}
}
