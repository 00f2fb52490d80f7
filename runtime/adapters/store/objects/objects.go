// Package objects stores message attachments as objects addressed by key:
// Dir keeps them in a directory (the embedded default of `concord dev`),
// S3 in any S3-compatible object store through minio-go. Both satisfy
// the same contract, checked by the same tests: Put is durable when it
// returns nil, Get of a missing key is ErrNotFound, keys are opaque
// strings of the characters Key allows.
package objects

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
)

// ErrNotFound is returned (wrapped) for a key that holds no object.
var ErrNotFound = errors.New("objects: not found")

// Info describes a stored object.
type Info struct {
	Size        int64
	ContentType string
}

// Store is an object store.
type Store interface {
	// Put stores size bytes from r under key with a content type.
	Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) error
	// Get opens an object; the caller closes it.
	Get(ctx context.Context, key string) (io.ReadCloser, Info, error)
	// Delete removes an object; a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// DeletePrefix removes every object under prefix, a key whose
	// objects are prefix/...; none is not an error.
	DeletePrefix(ctx context.Context, prefix string) error
}

// CheckKey accepts keys of slash-separated segments of letters, digits,
// '.', '-' and '_', none empty, "." or "..": what the API mints, safe as
// a relative path and as an S3 key.
func CheckKey(key string) error {
	if key == "" || len(key) > 512 {
		return fmt.Errorf("objects: bad key length %d", len(key))
	}
	for _, seg := range strings.Split(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("objects: bad key %q", key)
		}
		for _, r := range seg {
			ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_'
			if !ok {
				return fmt.Errorf("objects: bad key %q", key)
			}
		}
	}
	return nil
}
