package platform

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/concord-chat/concord/runtime/snowflake"
	"github.com/concord-chat/concord/runtime/store"
)

// devUserName is the account `concord dev` creates on first start.
const devUserName = "dev"

// devUser makes sure the dev account exists and returns a token for it.
// The password is random and written once to <DataDir>/dev-password.
func (p *Platform) devUser(ctx context.Context, ids interface{ Next() (snowflake.ID, error) }) (string, error) {
	u, err := p.store.GetUserByName(ctx, devUserName)
	if errors.Is(err, store.ErrNotFound) {
		pw := make([]byte, 12)
		if _, err := rand.Read(pw); err != nil {
			return "", fmt.Errorf("platform: dev password: %w", err)
		}
		password := hex.EncodeToString(pw)
		hash, err := p.auth.HashPassword(password)
		if err != nil {
			return "", fmt.Errorf("platform: hash dev password: %w", err)
		}
		id, err := ids.Next()
		if err != nil {
			return "", fmt.Errorf("platform: dev user id: %w", err)
		}
		u = store.User{ID: id, Username: devUserName, GlobalName: "Dev", PasswordHash: hash, CreatedAt: time.Now().UTC()}
		if err := p.store.CreateUser(ctx, u); err != nil {
			return "", fmt.Errorf("platform: create dev user: %w", err)
		}
		if err := writeFileSync(filepath.Join(p.cfg.DataDir, "dev-password"), []byte(password+"\n")); err != nil {
			return "", fmt.Errorf("platform: write dev password: %w", err)
		}
		p.log.Info("created dev user", "username", devUserName, "user_id", id)
	} else if err != nil {
		return "", fmt.Errorf("platform: look up dev user: %w", err)
	}
	return p.auth.Mint(u), nil
}

// writeFileSync writes a file durably (0600) via a temp file and rename.
func writeFileSync(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
