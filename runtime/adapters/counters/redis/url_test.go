package redis_test

import (
	"context"
	"errors"
	"testing"

	"github.com/concord-chat/concord/runtime/adapters/counters"
	"github.com/concord-chat/concord/runtime/adapters/counters/redis"
)

func TestParseURL(t *testing.T) {
	for _, c := range []struct {
		in   string
		want redis.Config
	}{
		{"redis://127.0.0.1:6390", redis.Config{Addr: "127.0.0.1:6390"}},
		{"redis://cache", redis.Config{Addr: "cache:6379"}},
		{"redis://u:p%40ss@[::1]:7000/3?prefix=eu1:", redis.Config{Addr: "[::1]:7000", DB: 3, Username: "u", Password: "p@ss", Prefix: "eu1:"}},
	} {
		got, err := redis.ParseURL(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseURL(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"http://x:1", "redis://", "redis://h:1/x", "redis://h:1?db=2", "redis://h:1/-1"} {
		if _, err := redis.ParseURL(in); !errors.Is(err, counters.ErrInvalid) {
			t.Errorf("ParseURL(%q) err = %v, want ErrInvalid", in, err)
		}
	}
}

// TestNewUnreachable checks that New fails fast, with ErrUnavailable,
// against a port nothing listens on.
func TestNewUnreachable(t *testing.T) {
	_, err := redis.New(context.Background(), redis.Config{Addr: "127.0.0.1:1"})
	if !errors.Is(err, counters.ErrUnavailable) {
		t.Fatalf("New on a closed port: err = %v, want ErrUnavailable", err)
	}
	if _, err := redis.New(context.Background(), redis.Config{}); !errors.Is(err, counters.ErrInvalid) {
		t.Fatalf("New without Addr: err = %v, want ErrInvalid", err)
	}
}
