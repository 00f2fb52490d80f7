package cluster

import "github.com/concord-chat/concord/runtime/presencerole"

// RolePresence is the presence role (runtime/presencerole): every live
// session of every user, as gateway nodes report them, folded into one
// status per user and broadcast to friends and guilds. A cluster runs two
// or more presence nodes, each owning the users a ring gives it; gateway
// nodes with --presence build the role's gateway side.
const RolePresence = presencerole.Name
