package apirole

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"os"
	"strings"

	"github.com/concord-chat/concord/runtime/adapters/store/objects"
	"github.com/concord-chat/concord/runtime/config"
)

// OpenObjects opens the attachment store cfg.Objects names: dir:PATH (the
// embedded default) or an S3-compatible bucket (s3://, s3+http://). The
// S3 credentials may come from CONCORD_S3_ACCESS_KEY and
// CONCORD_S3_SECRET_KEY instead of the URL.
func OpenObjects(ctx context.Context, cfg config.Config) (objects.Store, error) {
	v := cfg.Objects
	switch {
	case strings.HasPrefix(v, "dir:"):
		d, err := objects.NewDir(strings.TrimPrefix(v, "dir:"))
		if err != nil {
			return nil, fmt.Errorf("apirole: --objects: %w", err)
		}
		return d, nil
	case strings.HasPrefix(v, "s3://"), strings.HasPrefix(v, "s3+http://"):
		s3cfg, err := objects.ParseS3URL(v)
		if err != nil {
			return nil, fmt.Errorf("apirole: --objects: %w", err)
		}
		if k := os.Getenv("CONCORD_S3_ACCESS_KEY"); k != "" && s3cfg.AccessKey == "" {
			s3cfg.AccessKey, s3cfg.SecretKey = k, os.Getenv("CONCORD_S3_SECRET_KEY")
		}
		s, err := objects.NewS3(ctx, s3cfg)
		if err != nil {
			return nil, fmt.Errorf("apirole: --objects: %w", err)
		}
		return s, nil
	default:
		return nil, fmt.Errorf("apirole: unknown --objects %q (want dir:PATH or s3://key:secret@host:port/bucket)", config.RedactURL(v))
	}
}

// AttachmentKey derives the key that signs attachment URLs from the
// server key, so every node of a cluster signs and checks alike.
func AttachmentKey(serverKey []byte) []byte {
	m := hmac.New(sha256.New, serverKey)
	m.Write([]byte("concord attachment urls"))
	return m.Sum(nil)
}
