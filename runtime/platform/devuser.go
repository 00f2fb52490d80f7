package platform

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/concord-chat/concord/runtime/app"
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
		if err := app.WriteFileSync(filepath.Join(p.cfg.DataDir, "dev-password"), []byte(password+"\n")); err != nil {
			return "", fmt.Errorf("platform: write dev password: %w", err)
		}
		p.log.Info("created dev user", "username", devUserName, "user_id", id)
	} else if err != nil {
		return "", fmt.Errorf("platform: look up dev user: %w", err)
	}
	return p.auth.Mint(u), nil
}
