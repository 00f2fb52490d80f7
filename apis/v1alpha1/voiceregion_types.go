package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// PublicAddressMode is how clients reach an SFU's UDP ports.
// +kubebuilder:validation:Enum=HostNetwork;NodeExternalIP;LoadBalancer
type PublicAddressMode string

// Public address modes.
const (
	// PublicAddressHostNetwork runs SFU pods on the host network and
	// advertises the node's external IP.
	PublicAddressHostNetwork PublicAddressMode = "HostNetwork"
	// PublicAddressNodeExternalIP maps the UDP range with hostPorts and
	// advertises the node's external IP.
	PublicAddressNodeExternalIP PublicAddressMode = "NodeExternalIP"
	// PublicAddressLoadBalancer gives each SFU pod its own LoadBalancer
	// Service (signal port and every UDP port); the SFU advertises the
	// Service's ingress address.
	PublicAddressLoadBalancer PublicAddressMode = "LoadBalancer"
)

// VoiceRegionSpec is the desired state of a regional SFU fleet.
// +kubebuilder:validation:XValidation:rule="!has(self.minServers) || !has(self.maxServers) || self.minServers <= self.maxServers",message="minServers must not exceed maxServers"
// +kubebuilder:validation:XValidation:rule="!has(self.mediaPort) || !has(self.webrtcPort) || self.mediaPort != self.webrtcPort",message="mediaPort and webrtcPort must differ"
// +kubebuilder:validation:XValidation:rule="!has(self.portRange) || !has(self.publicAddress) || self.publicAddress == 'NodeExternalIP'",message="portRange needs publicAddress NodeExternalIP (host networking binds the admin ports too; a LoadBalancer has its own address per server)"
// +kubebuilder:validation:XValidation:rule="!has(self.portRange) || (self.portRange.max - self.portRange.min + 1) / 3 >= (has(self.maxServers) ? self.maxServers : 10)",message="portRange must hold three ports for each of maxServers servers"
type VoiceRegionSpec struct {
	// ClusterRef names the ConcordCluster.
	ClusterRef ClusterReference `json:"clusterRef"`
	// Region is the name clients and guilds see (e.g. "eu-west").
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="region is immutable"
	Region string `json:"region"`
	// MinServers is the lower bound of SFU pods.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +optional
	MinServers int32 `json:"minServers"`
	// MaxServers is the upper bound of SFU pods.
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxServers int32 `json:"maxServers,omitempty"`
	// Buffer is the free capacity to keep, as a number of servers' worth of
	// participants ("2") or a percentage of the total ("20%") — Agones'
	// buffer policy, in participants rather than game servers.
	// +kubebuilder:default=1
	// +kubebuilder:validation:XIntOrString
	// +optional
	Buffer intstr.IntOrString `json:"buffer,omitempty"`
	// CapacityPerServer is how many participants one SFU pod carries.
	// +kubebuilder:default=500
	// +kubebuilder:validation:Minimum=1
	// +optional
	CapacityPerServer int32 `json:"capacityPerServer,omitempty"`
	// MediaPort is the UDP port of each SFU pod bots and Discord libraries
	// send RTP to (--voice-udp); one port carries every call of the pod.
	// +kubebuilder:default=50000
	// +kubebuilder:validation:Minimum=1024
	// +kubebuilder:validation:Maximum=65535
	// +optional
	MediaPort int32 `json:"mediaPort,omitempty"`
	// WebRTCPort is the UDP port browsers' WebRTC media (ICE) uses
	// (--voice-webrtc-udp); 0 turns WebRTC off.
	// +kubebuilder:default=50001
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=65535
	// +optional
	WebRTCPort int32 `json:"webrtcPort,omitempty"`
	// SignalPort is the voice gateway (WebSocket) port of each SFU pod
	// (--voice-listen), the endpoint VOICE_SERVER_UPDATE gives clients.
	// +kubebuilder:default=8443
	// +optional
	SignalPort int32 `json:"signalPort,omitempty"`
	// AdminPort serves /admin/voice/load, /admin/drain and /metrics.
	// +kubebuilder:default=9090
	// +optional
	AdminPort int32 `json:"adminPort,omitempty"`
	// PortRange gives each SFU pod its own three ports (signal, media,
	// WebRTC: min+3k, min+3k+1, min+3k+2 for the pod's slot k) as
	// hostPorts, instead of signalPort, mediaPort and webrtcPort for
	// every pod, so several SFUs of the region can share a node. Only
	// with publicAddress NodeExternalIP.
	// +optional
	PortRange *VoicePortRange `json:"portRange,omitempty"`
	// PublicAddress is how clients reach the UDP ports.
	// +kubebuilder:default=NodeExternalIP
	// +optional
	PublicAddress PublicAddressMode `json:"publicAddress,omitempty"`
	// PublicHost is the host name an SFU puts in its endpoint (the one
	// VOICE_SERVER_UPDATE gives clients) instead of its address, so the TLS
	// certificate in front of signalPort can name it. $(CONCORD_VOICE_ID)
	// expands to the pod's name, one name per server:
	// "$(CONCORD_VOICE_ID).eu-west.voice.example.com". Media candidates
	// keep the IPv4 address publicAddress gives. Empty: that address.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?|\$\(CONCORD_VOICE_ID\))(\.([a-z0-9]([-a-z0-9]*[a-z0-9])?|\$\(CONCORD_VOICE_ID\)))*$`
	// +optional
	PublicHost string `json:"publicHost,omitempty"`
	// ICE lists the STUN and TURN servers browsers are handed in voice
	// Ready (ice_servers), for clients that cannot reach the SFU's UDP
	// port directly. Credentials are references to Secrets, never values.
	// +optional
	ICE *VoiceICE `json:"ice,omitempty"`
	// PodPlacement sets resources, node selector and tolerations.
	// +optional
	PodPlacement `json:",inline"`
}

// VoicePortRange is an inclusive range of host ports.
// +kubebuilder:validation:XValidation:rule="self.max >= self.min + 2",message="portRange needs at least three ports"
type VoicePortRange struct {
	// Min is the first port.
	// +kubebuilder:validation:Minimum=1024
	// +kubebuilder:validation:Maximum=65535
	Min int32 `json:"min"`
	// Max is the last port.
	// +kubebuilder:validation:Minimum=1024
	// +kubebuilder:validation:Maximum=65535
	Max int32 `json:"max"`
}

// VoiceICE is a region's STUN/TURN settings. A TURN server needs either a
// shared secret (coturn's static-auth-secret with use-auth-secret: every
// voice session is handed its own time-limited credential) or one static
// username and credential.
// +kubebuilder:validation:XValidation:rule="has(self.username) == has(self.credential)",message="ice.username and ice.credential go together"
// +kubebuilder:validation:XValidation:rule="!self.servers.exists(u, u.startsWith('turn')) || has(self.sharedSecret) || has(self.username)",message="a turn: or turns: server needs ice.sharedSecret, or ice.username and ice.credential"
// +kubebuilder:validation:XValidation:rule="!has(self.credentialTTL) || has(self.sharedSecret)",message="ice.credentialTTL applies to credentials minted from ice.sharedSecret"
type VoiceICE struct {
	// Servers are STUN/TURN URLs: stun:host[:port], stuns:, turn:host[:port][?transport=udp|tcp], turns:.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=512
	// +kubebuilder:validation:items:Pattern=`^(stun|stuns|turn|turns):[^\s,]+$`
	// +listType=atomic
	Servers []string `json:"servers"`
	// SharedSecret is the Secret key holding the secret the TURN servers
	// share with the SFUs; each session gets its own credential minted
	// from it.
	// +optional
	SharedSecret *SecretKeyReference `json:"sharedSecret,omitempty"`
	// CredentialTTL is how long a minted credential lasts (a Go duration
	// such as 12h); a call through the relay cannot outlive it. Default 12h.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +optional
	CredentialTTL *metav1.Duration `json:"credentialTTL,omitempty"`
	// Username is the Secret key holding one static TURN user name.
	// +optional
	Username *SecretKeyReference `json:"username,omitempty"`
	// Credential is the Secret key holding that user's password.
	// +optional
	Credential *SecretKeyReference `json:"credential,omitempty"`
}

// VoiceServerStatus is one SFU pod and the load it last reported to the
// registry (voice/load/<pod name>).
type VoiceServerStatus struct {
	// Name of the pod, also the voice server id.
	Name string `json:"name"`
	// Endpoint is the voice gateway address clients are given.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`
	// Ready is the pod's readiness.
	Ready bool `json:"ready"`
	// Draining servers take no new calls and go when their calls end.
	// +optional
	Draining bool `json:"draining,omitempty"`
	// Reporting is true while the server's load report is fresh.
	Reporting bool `json:"reporting"`
	// Calls hosted by the server.
	Calls int64 `json:"calls"`
	// Participants connected to the server.
	Participants int64 `json:"participants"`
	// PacketsForwarded per second over the server's last report period.
	// +optional
	PacketsForwarded int64 `json:"packetsForwarded,omitempty"`
	// Load is participants against capacityPerServer, as a percentage ("42%").
	// +optional
	Load string `json:"load,omitempty"`
	// PacketLoss is the share of speakers' packets that never reached the
	// server over its last report period ("0.4%"); guilds place no new
	// calls on a server whose recent loss, jitter or RTT is poor.
	// +optional
	PacketLoss string `json:"packetLoss,omitempty"`
	// Jitter is the mean interarrival jitter of the server's incoming
	// streams ("3.2ms").
	// +optional
	Jitter string `json:"jitter,omitempty"`
	// RTT is the mean round trip the server's WebRTC listeners reported
	// over its last report period ("45ms"); empty without reports.
	// +optional
	RTT string `json:"rtt,omitempty"`
}

// VoiceRegionStatus is the observed state of a regional SFU fleet.
type VoiceRegionStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready, Progressing, Degraded.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Servers is the number of SFU pods, draining ones included.
	// +optional
	Servers int32 `json:"servers"`
	// ReadyServers is the number of ready, non-draining SFU pods.
	// +optional
	ReadyServers int32 `json:"readyServers"`
	// DrainingServers is the number of SFU pods waiting for their calls to end.
	// +optional
	DrainingServers int32 `json:"drainingServers"`
	// DesiredServers is what the buffer policy asks for.
	// +optional
	DesiredServers int32 `json:"desiredServers"`
	// ActiveCalls across the region.
	// +optional
	ActiveCalls int64 `json:"activeCalls"`
	// Participants across the region.
	// +optional
	Participants int64 `json:"participants"`
	// Capacity is the participant capacity of the non-draining servers.
	// +optional
	Capacity int64 `json:"capacity"`
	// CapacityUsed is participants / capacity, as a percentage ("42%").
	// +optional
	CapacityUsed string `json:"capacityUsed,omitempty"`
	// ServerLoads lists every SFU pod with its load, by name.
	// +optional
	// +listType=map
	// +listMapKey=name
	ServerLoads []VoiceServerStatus `json:"serverLoads,omitempty"`
}

// VoiceRegion is a regional fleet of SFU pods, scaled to keep a buffer of
// free capacity. A server with active calls is drained, never killed.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=vr,categories=concord
// +kubebuilder:printcolumn:name="Region",type=string,JSONPath=`.spec.region`
// +kubebuilder:printcolumn:name="Servers",type=integer,JSONPath=`.status.servers`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyServers`
// +kubebuilder:printcolumn:name="Calls",type=integer,JSONPath=`.status.activeCalls`
// +kubebuilder:printcolumn:name="Used",type=string,JSONPath=`.status.capacityUsed`
// +kubebuilder:printcolumn:name="Draining",type=integer,JSONPath=`.status.drainingServers`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type VoiceRegion struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state.
	Spec VoiceRegionSpec `json:"spec"`
	// Status is the observed state.
	// +optional
	Status VoiceRegionStatus `json:"status,omitempty"`
}

// VoiceRegionList is a list of VoiceRegions.
//
// +kubebuilder:object:root=true
type VoiceRegionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the regions.
	Items []VoiceRegion `json:"items"`
}

func init() {
	register(&VoiceRegion{}, &VoiceRegionList{})
}
