package objects

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3Config names an S3-compatible bucket.
type S3Config struct {
	// Endpoint is host:port of the S3 API.
	Endpoint string
	Bucket   string
	Region   string
	// AccessKey and SecretKey are static credentials.
	AccessKey string
	SecretKey string
	// Secure selects https.
	Secure bool
	// Prefix is prepended to every key ("" for none).
	Prefix string
}

// ParseS3URL reads s3://ACCESS:SECRET@host:port/bucket[/prefix]?region=R&secure=false.
// Credentials may be left out of the URL and set on the config after.
func ParseS3URL(raw string) (S3Config, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "s3" && u.Scheme != "s3+http") || u.Host == "" {
		return S3Config{}, fmt.Errorf("objects: bad S3 URL (want s3://[key:secret@]host:port/bucket[/prefix])")
	}
	bucket, prefix, _ := strings.Cut(strings.Trim(u.Path, "/"), "/")
	if bucket == "" {
		return S3Config{}, errors.New("objects: S3 URL names no bucket")
	}
	cfg := S3Config{Endpoint: u.Host, Bucket: bucket, Prefix: prefix, Region: u.Query().Get("region"),
		Secure: u.Scheme == "s3" && u.Query().Get("secure") != "false"}
	if u.User != nil {
		cfg.AccessKey = u.User.Username()
		cfg.SecretKey, _ = u.User.Password()
	}
	return cfg, nil
}

// S3 is a Store in an S3 bucket.
type S3 struct {
	c      *minio.Client
	bucket string
	prefix string
}

// NewS3 connects to the bucket, creating it when missing.
func NewS3(ctx context.Context, cfg S3Config) (*S3, error) {
	c, err := minio.New(cfg.Endpoint, &minio.Options{
		Creds:  credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure: cfg.Secure,
		Region: cfg.Region,
	})
	if err != nil {
		return nil, fmt.Errorf("objects: S3 client: %w", err)
	}
	ok, err := c.BucketExists(ctx, cfg.Bucket)
	if err != nil {
		return nil, fmt.Errorf("objects: S3 bucket %s: %w", cfg.Bucket, err)
	}
	if !ok {
		if err := c.MakeBucket(ctx, cfg.Bucket, minio.MakeBucketOptions{Region: cfg.Region}); err != nil {
			return nil, fmt.Errorf("objects: create S3 bucket %s: %w", cfg.Bucket, err)
		}
	}
	p := strings.Trim(cfg.Prefix, "/")
	if p != "" {
		p += "/"
	}
	return &S3{c: c, bucket: cfg.Bucket, prefix: p}, nil
}

// Put implements Store.
func (s *S3) Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	_, err := s.c.PutObject(ctx, s.bucket, s.prefix+key, r, size, minio.PutObjectOptions{ContentType: contentType})
	if err != nil {
		return fmt.Errorf("objects: S3 put %s: %w", key, err)
	}
	return nil
}

// Get implements Store.
func (s *S3) Get(ctx context.Context, key string) (io.ReadCloser, Info, error) {
	if err := CheckKey(key); err != nil {
		return nil, Info{}, fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	st, err := s.c.StatObject(ctx, s.bucket, s.prefix+key, minio.StatObjectOptions{})
	if err != nil {
		if minio.ToErrorResponse(err).Code == minio.NoSuchKey || minio.ToErrorResponse(err).StatusCode == 404 {
			return nil, Info{}, fmt.Errorf("objects: %s: %w", key, ErrNotFound)
		}
		return nil, Info{}, fmt.Errorf("objects: S3 stat %s: %w", key, err)
	}
	obj, err := s.c.GetObject(ctx, s.bucket, s.prefix+key, minio.GetObjectOptions{})
	if err != nil {
		return nil, Info{}, fmt.Errorf("objects: S3 get %s: %w", key, err)
	}
	return obj, Info{Size: st.Size, ContentType: st.ContentType}, nil
}

// Delete implements Store.
func (s *S3) Delete(ctx context.Context, key string) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if err := s.c.RemoveObject(ctx, s.bucket, s.prefix+key, minio.RemoveObjectOptions{}); err != nil {
		return fmt.Errorf("objects: S3 delete %s: %w", key, err)
	}
	return nil
}

// DeletePrefix implements Store: it lists the keys under prefix and
// removes them in batches.
func (s *S3) DeletePrefix(ctx context.Context, prefix string) error {
	if err := CheckKey(prefix); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	keys := make(chan minio.ObjectInfo)
	var listErr error
	go func() {
		defer close(keys)
		for obj := range s.c.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.prefix + prefix + "/", Recursive: true}) {
			if obj.Err != nil {
				listErr = obj.Err
				return
			}
			select {
			case keys <- obj:
			case <-ctx.Done():
				return
			}
		}
	}()
	var errs []error
	for e := range s.c.RemoveObjects(ctx, s.bucket, keys, minio.RemoveObjectsOptions{}) {
		errs = append(errs, fmt.Errorf("%s: %w", e.ObjectName, e.Err))
	}
	if listErr != nil {
		errs = append(errs, listErr)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("objects: S3 delete %s/: %w", prefix, err)
	}
	return nil
}
