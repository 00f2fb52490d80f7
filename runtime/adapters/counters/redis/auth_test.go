package redis_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/concord-chat/concord/runtime/adapters/counters/redis"
)

// The password is kept in the Config for AUTH but redacted wherever the
// Config or its URL is printed: String, %v, slog attributes, ParseURL
// errors.
func TestPasswordRedacted(t *testing.T) {
	const pw = "s3cret-pass"
	cfg, err := redis.ParseURL("redis://app:" + pw + "@cache:6380/2")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Username != "app" || cfg.Password != pw {
		t.Fatalf("ParseURL lost the credentials: username %q, password set %t", cfg.Username, cfg.Password == pw)
	}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("counters", "config", cfg)
	for name, s := range map[string]string{"String": cfg.String(), "%v": fmt.Sprintf("%v", cfg), "%+v": fmt.Sprintf("%+v", cfg), "slog": buf.String()} {
		if strings.Contains(s, pw) {
			t.Errorf("%s holds the password: %s", name, s)
		}
		if !strings.Contains(s, "app") || !strings.Contains(s, "xxxxx") {
			t.Errorf("%s should show the user and a redacted password: %s", name, s)
		}
	}
	for _, bad := range []string{
		"redis://app:" + pw + "@cache:6380/x",    // bad database
		"redis://app:" + pw + "@cache:6380?db=1", // unknown parameter
		"redis://app:" + pw + "@cache:port",      // url.Parse error (bad port)
		"rediss://app:" + pw + "@cache:6380",     // wrong scheme
	} {
		_, err := redis.ParseURL(bad)
		if err == nil || strings.Contains(err.Error(), pw) {
			t.Errorf("ParseURL(bad URL) error = %v; want an error without the password", err)
		}
	}
}
