// Package controller holds the reconcilers of Concord's operator:
// ConcordCluster (the runtime roles), GatewayPool (gateway pods, drained one
// by one), GuildPlacement (a guild pinned to a dedicated node), RelayTier
// (relays for big guilds) and VoiceRegion (a regional SFU fleet with a buffer
// of free capacity). They reach the running fleet through the ports of
// package fleet.
package controller
