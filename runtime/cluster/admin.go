package cluster

import (
	"github.com/concord-chat/concord/runtime/adminauth"
)

// nodeAdminToken is the admin token of a node: the configured one, else
// the one derived from the cluster's token-signing key, which every node
// and the operator share.
func nodeAdminToken(cfg Config, serverKey []byte) string {
	if cfg.AdminToken != "" {
		return cfg.AdminToken
	}
	return adminauth.Derive(serverKey)
}
