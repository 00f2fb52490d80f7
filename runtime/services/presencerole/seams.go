package presencerole

import "github.com/concord-chat/concord/runtime/services/role"

// GatewaySide is what the presence side gives the process's gateway
// (role.PresenceSide).
type GatewaySide = role.PresenceSide

// GatewayKey is the port the gateway role finds its presence side under
// (role.PresenceGateway). Absent: the gateway runs without presence (a
// gateway node of a cluster without --presence).
var GatewayKey = role.PresenceGateway
