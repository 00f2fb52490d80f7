package cluster

import (
	"context"
	"net/http"
	"slices"

	"github.com/concord-chat/concord/runtime/role"
	"github.com/concord-chat/concord/runtime/roles"
)

// Role is a role built from the table of package roles rather than by New
// itself: the way a new domain package (voice, live comments, ...) joins
// the process, built by the same code in `concord dev`.
type Role = role.Role

// Builder is what a Role builds from and contributes to.
type Builder = role.Builder

// tableRoles are the roles built through package role (a variable so a
// test can add one).
var tableRoles = roles.Table

// chatRoles are the chat roles built through package role (a variable
// so a test can wrap them).
var chatRoles = roles.Chat

// buildTableRoles builds the table roles this node runs onto mux and the
// node's group.
func (n *Node) buildTableRoles(ctx context.Context, parts role.Parts, mux *http.ServeMux) error {
	return role.Build(ctx, tableRoles, func(name string) bool { return slices.Contains(n.cfg.Roles, name) }, parts, mux, &n.group)
}
