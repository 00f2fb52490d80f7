package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
)

// devUserName is the account `concord dev` creates on first start.
const devUserName = "dev"

// devUser makes sure the dev account exists and returns a token for it.
// The password is random and written once to <DataDir>/dev-password.
func (n *Node) devUser(ctx context.Context) (string, error) {
	u, err := n.roleStore.GetUserByName(ctx, devUserName)
	if errors.Is(err, store.ErrNotFound) {
		pw := make([]byte, 12)
		if _, err := rand.Read(pw); err != nil {
			return "", fmt.Errorf("dev password: %w", err)
		}
		password := hex.EncodeToString(pw)
		hash, err := n.basics.Auth.HashPassword(password)
		if err != nil {
			return "", fmt.Errorf("hash dev password: %w", err)
		}
		id, err := n.basics.IDs.Next()
		if err != nil {
			return "", fmt.Errorf("dev user id: %w", err)
		}
		u = store.User{ID: id, Username: devUserName, GlobalName: "Dev", PasswordHash: hash, CreatedAt: time.Now().UTC()}
		if err := n.roleStore.CreateUser(ctx, u); err != nil {
			return "", fmt.Errorf("create dev user: %w", err)
		}
		if err := WriteFileSync(filepath.Join(n.cfg.DataDir, "dev-password"), []byte(password+"\n")); err != nil {
			return "", fmt.Errorf("write dev password: %w", err)
		}
		n.log.Info("created dev user", "username", devUserName, "user_id", id)
	} else if err != nil {
		return "", fmt.Errorf("look up dev user: %w", err)
	}
	return n.basics.Auth.Mint(u), nil
}
