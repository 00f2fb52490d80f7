package main

import (
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/concord-chat/concord/runtime/config"
)

// bindVoiceFlags registers the voice role's flags (config.Voice).
func bindVoiceFlags(fs *pflag.FlagSet, v *config.Voice) {
	strFlag(fs, &v.Listen, "voice-listen", "", "voice gateway listen address (the SFU's wss:// endpoint; default 127.0.0.1:0)")
	strFlag(fs, &v.UDP, "voice-udp", "", "voice media (RTP over UDP) listen address; default the voice-listen host, port 0")
	strFlag(fs, &v.WebRTCUDP, "voice-webrtc-udp", "", "browsers' WebRTC media (one ICE UDP port for every peer) listen address; default the voice-listen host, port 0; off: no WebRTC")
	strFlag(fs, &v.PublicHost, "voice-public-host", "", "host of the voice endpoint given to clients in VOICE_SERVER_UPDATE; default the voice-listen host")
	strFlag(fs, &v.PublicIP, "voice-public-ip", "", "IPv4 address clients send voice media to; default the public host when it is an IPv4 address")
	strFlag(fs, &v.Region, "voice-region", "", "voice region of this SFU, and on a guild node the region of calls in automatic channels whose joiner's region is unknown (default local)")
	strFlag(fs, &v.ID, "voice-id", "", "voice server id in tokens and load reports (default the node name)")
	strFlag(fs, &v.TLS, "voice-tls", "", "voice gateway TLS: devca (a certificate from the CA written to <data-dir>/voice-ca.pem) or off (behind a TLS proxy); default devca in dev, off in serve")
	strFlag(fs, &v.TokenKey, "voice-token-key", "", "hex Ed25519 seed the guild signs voice tokens with; empty: dev keeps <data-dir>/voice-token.key, serve derives it from the server key")
	trusted := os.Getenv(envName("voice-trusted-keys"))
	var def []string
	if trusted != "" {
		def = strings.Split(trusted, ",")
	}
	fs.StringSliceVar(&v.TrustedKeys, "voice-trusted-keys", def, usage("voice-trusted-keys", "hex Ed25519 public keys the SFU accepts voice tokens from; empty: the voice token key's"))
	var ice []string
	if e := os.Getenv(envName("voice-ice-servers")); e != "" {
		ice = strings.Split(e, ",")
	}
	fs.StringSliceVar(&v.ICEServers, "voice-ice-servers", ice, usage("voice-ice-servers", "STUN/TURN server URLs handed to WebRTC clients (turn:host:3478?transport=udp, stun:host:3478), for browsers behind NAT or firewalls; TURN needs --voice-ice-secret, or --voice-ice-username and --voice-ice-credential"))
	strFlag(fs, &v.ICEUsername, "voice-ice-username", "", "TURN username handed to WebRTC clients with --voice-ice-servers")
	secretFlag(fs, &v.ICECredential, "voice-ice-credential", "TURN credential (password) handed to WebRTC clients with --voice-ice-servers; prefer the environment variable")
	secretFlag(fs, &v.ICESecret, "voice-ice-secret", "TURN shared secret (coturn static-auth-secret with use-auth-secret): each voice session gets its own time-limited credential for --voice-ice-servers; prefer the environment variable")
	durFlag(fs, &v.ICECredentialTTL, "voice-ice-credential-ttl", 0, "lifetime of a TURN credential minted with --voice-ice-secret (0: 12h)")
}
