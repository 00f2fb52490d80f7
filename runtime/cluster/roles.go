package cluster

import (
	"github.com/concord-chat/concord/runtime/role"
	"github.com/concord-chat/concord/runtime/roles"
)

// Role is a role built from the table of package roles rather than by New
// itself: the way a new domain package (voice, live comments, ...) joins
// the process, built by the same code in `concord dev`.
type Role = role.Role

// Builder is what a Role builds from and contributes to.
type Builder = role.Builder

// tableRoles are the roles built through package role after the chat
// roles (a variable so a test can add one).
var tableRoles = roles.Table

// chatRoles are the chat roles built through package role (a variable
// so a test can wrap them).
var chatRoles = roles.Chat
