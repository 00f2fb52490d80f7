//go:build integration

package objects

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
)

// TestS3 runs the Store contract against the real S3-compatible server
// hack/test-deps.sh starts (CONCORD_S3, an s3+http:// URL).
func TestS3(t *testing.T) {
	raw := os.Getenv("CONCORD_S3")
	if raw == "" {
		t.Fatal("CONCORD_S3 is not set: run make test-deps (it starts an S3-compatible server) and source ~/.cache/concord/test-env.sh")
	}
	cfg, err := ParseS3URL(raw)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Prefix = fmt.Sprintf("test-%x", rand.Uint64())
	s, err := NewS3(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	testStore(t, s)
}
