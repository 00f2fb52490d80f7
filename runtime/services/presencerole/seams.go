package presencerole

import "github.com/concord-chat/concord/runtime/services/wiring"

// GatewaySide is what the presence side gives the process's gateway
// (wiring.PresenceSide).
type GatewaySide = wiring.PresenceSide

// GatewayKey is the port the gateway role finds its presence side under
// (wiring.PresenceGateway). Absent: the gateway runs without presence (a
// gateway node of a cluster without --presence).
var GatewayKey = wiring.PresenceGateway
