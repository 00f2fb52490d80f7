package objects

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Dir is a Store in a local directory: each object is a file at its key,
// with its content type in a ".meta" file beside it. A Put writes a
// temporary file, syncs it and renames it into place, so a reader never
// sees a partial object and an acknowledged Put survives a crash.
type Dir struct {
	root string
}

// NewDir returns a Store rooted at dir, creating it.
func NewDir(dir string) (*Dir, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("objects: create %s: %w", dir, err)
	}
	return &Dir{root: dir}, nil
}

func (d *Dir) path(key string) (string, error) {
	if err := CheckKey(key); err != nil {
		return "", err
	}
	return filepath.Join(d.root, filepath.FromSlash(key)), nil
}

// Put implements Store.
func (d *Dir) Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) error {
	p, err := d.path(key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
		return fmt.Errorf("objects: put %s: %w", key, err)
	}
	meta, _ := json.Marshal(Info{Size: size, ContentType: contentType})
	if err := writeFile(p+".meta", bytes.NewReader(meta), int64(len(meta))); err != nil {
		return fmt.Errorf("objects: put %s: %w", key, err)
	}
	if err := writeFile(p, r, size); err != nil {
		return fmt.Errorf("objects: put %s: %w", key, err)
	}
	return syncDir(filepath.Dir(p))
}

// writeFile writes exactly size bytes of r to p through a synced
// temporary file renamed into place.
func writeFile(p string, r io.Reader, size int64) error {
	f, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	n, err := io.Copy(f, io.LimitReader(r, size+1))
	if err == nil && n != size {
		err = fmt.Errorf("wrote %d bytes, want %d", n, size)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("objects: sync %s: %w", dir, err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("objects: sync %s: %w", dir, err)
	}
	return nil
}

// Get implements Store.
func (d *Dir) Get(ctx context.Context, key string) (io.ReadCloser, Info, error) {
	p, err := d.path(key)
	if err != nil {
		return nil, Info{}, fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	var info Info
	raw, err := os.ReadFile(p + ".meta")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, Info{}, fmt.Errorf("objects: %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return nil, Info{}, fmt.Errorf("objects: get %s: %w", key, err)
	}
	if err := json.Unmarshal(raw, &info); err != nil {
		return nil, Info{}, fmt.Errorf("objects: get %s: corrupt metadata: %w", key, err)
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, Info{}, fmt.Errorf("objects: %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return nil, Info{}, fmt.Errorf("objects: get %s: %w", key, err)
	}
	return f, info, nil
}

// Delete implements Store.
func (d *Dir) Delete(ctx context.Context, key string) error {
	p, err := d.path(key)
	if err != nil {
		return err
	}
	for _, f := range []string{p, p + ".meta"} {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("objects: delete %s: %w", key, err)
		}
	}
	return nil
}

// DeletePrefix implements Store: the objects under prefix are the files
// of one directory.
func (d *Dir) DeletePrefix(ctx context.Context, prefix string) error {
	p, err := d.path(prefix)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(p); err != nil {
		return fmt.Errorf("objects: delete %s/: %w", prefix, err)
	}
	return nil
}
