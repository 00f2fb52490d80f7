// Package voice is Concord's selective forwarding unit (SFU): the voice
// server a client reaches with the endpoint and token the guild handed it.
//
// It speaks Discord's voice protocol as the bot libraries do: a signalling
// WebSocket (the voice gateway, v4 and v8) and UDP media encrypted with the
// rtpsize AEAD modes. Every speaker's packets are opened with the speaker's
// key and sealed again with each listener's key, the Opus payload never
// decoded. Admission is offline: the token (package token) is signed by the
// guild tier with a key the fleet trusts.
//
// A Server is built with New, runs its UDP loop and load reports with Run,
// and serves the voice gateway through Handler behind TLS.
package voice
