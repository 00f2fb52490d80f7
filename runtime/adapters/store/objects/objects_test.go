package objects

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

// testStore is the contract every Store meets.
func testStore(t *testing.T, s Store) {
	t.Helper()
	ctx := context.Background()
	key := "attachments/1/2/hello.txt"
	if err := s.Put(ctx, key, strings.NewReader("hello ☃"), int64(len("hello ☃")), "text/plain; charset=utf-8"); err != nil {
		t.Fatalf("Put: %v", err)
	}
	rc, info, err := s.Get(ctx, key)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || string(b) != "hello ☃" {
		t.Fatalf("Get body = %q, %v", b, err)
	}
	if info.Size != int64(len("hello ☃")) || info.ContentType != "text/plain; charset=utf-8" {
		t.Fatalf("Get info = %+v", info)
	}
	if _, _, err := s.Get(ctx, "attachments/1/2/missing"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get missing: %v, want ErrNotFound", err)
	}
	if err := s.Put(ctx, "../escape", strings.NewReader("x"), 1, "text/plain"); err == nil {
		t.Fatal("Put ../escape succeeded")
	}
	if err := s.Delete(ctx, key); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, _, err := s.Get(ctx, key); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get deleted: %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, key); err != nil {
		t.Fatalf("Delete again: %v", err)
	}
	// A short reader is refused and leaves nothing behind.
	if err := s.Put(ctx, "attachments/short", strings.NewReader("ab"), 5, "text/plain"); err == nil {
		t.Fatal("Put of a short body succeeded")
	}
	// DeletePrefix removes what is under the prefix, nothing beside it
	// (attachments/7 is not under attachments/70's prefix, nor the
	// reverse).
	for _, k := range []string{"attachments/70/1/a.txt", "attachments/70/2/b.txt", "attachments/7/3/c.txt"} {
		if err := s.Put(ctx, k, strings.NewReader("x"), 1, "text/plain"); err != nil {
			t.Fatalf("Put %s: %v", k, err)
		}
	}
	if err := s.DeletePrefix(ctx, "attachments/70"); err != nil {
		t.Fatalf("DeletePrefix: %v", err)
	}
	for _, k := range []string{"attachments/70/1/a.txt", "attachments/70/2/b.txt"} {
		if _, _, err := s.Get(ctx, k); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get %s after DeletePrefix: %v, want ErrNotFound", k, err)
		}
	}
	rc, _, err = s.Get(ctx, "attachments/7/3/c.txt")
	if err != nil {
		t.Fatalf("DeletePrefix removed a neighbour: %v", err)
	}
	rc.Close()
	if err := s.DeletePrefix(ctx, "attachments/70"); err != nil {
		t.Fatalf("DeletePrefix of nothing: %v", err)
	}
	if err := s.DeletePrefix(ctx, "../x"); err == nil {
		t.Fatal("DeletePrefix ../x succeeded")
	}
}

func TestDir(t *testing.T) {
	d, err := NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	testStore(t, d)
}

func TestCheckKey(t *testing.T) {
	for _, k := range []string{"a", "a/b.c", "x-y_z/0"} {
		if err := CheckKey(k); err != nil {
			t.Errorf("CheckKey(%q) = %v", k, err)
		}
	}
	for _, k := range []string{"", "/a", "a/", "a//b", "..", "a/../b", "a b", "a\\b", "ä"} {
		if CheckKey(k) == nil {
			t.Errorf("CheckKey(%q) accepted", k)
		}
	}
}

func TestParseS3URL(t *testing.T) {
	c, err := ParseS3URL("s3+http://key:secret@127.0.0.1:9000/bucket/pre/fix?region=eu-1")
	if err != nil {
		t.Fatal(err)
	}
	want := S3Config{Endpoint: "127.0.0.1:9000", Bucket: "bucket", Prefix: "pre/fix", Region: "eu-1", AccessKey: "key", SecretKey: "secret"}
	if c != want {
		t.Fatalf("got %+v, want %+v", c, want)
	}
	if _, err := ParseS3URL("http://x/y"); err == nil {
		t.Fatal("accepted http://")
	}
	if _, err := ParseS3URL("s3://host:1/"); err == nil {
		t.Fatal("accepted a URL without bucket")
	}
}
