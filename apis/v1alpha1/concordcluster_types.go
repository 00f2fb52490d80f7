package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Role names of the runtime roles a ConcordCluster runs.
const (
	RoleAPI       = "api"
	RoleGuild     = "guild"
	RoleData      = "data"
	RoleReadState = "readstate"
	RolePresence  = "presence"
	RoleRelay     = "relay"
	RoleGateway   = "gateway"
	RoleVoice     = "voice"

	// Live-comment roles (spec.live).
	RoleLiveAPI      = "live-api"
	RoleLiveGateway  = "live-gateway"
	RoleLiveRouter   = "live-router"
	RoleLiveArchiver = "live-archiver"
	// RoleLiveRelay is a node of the live relay tree (spec.live.relay).
	RoleLiveRelay = "live-relay"
	// RoleLiveModeration is the ML moderation consumer (spec.live.moderation).
	RoleLiveModeration = "live-moderation"
)

// ConcordClusterSpec is the desired state of a Concord platform.
// +kubebuilder:validation:XValidation:rule="!has(self.autoscaling) || !has(self.autoscaling.guild) || self.autoscaling.guild.minReplicas <= self.autoscaling.guild.maxReplicas",message="autoscaling.guild.minReplicas must not exceed maxReplicas"
// +kubebuilder:validation:XValidation:rule="!has(self.autoscaling) || !has(self.autoscaling.liveGateway) || has(self.live)",message="autoscaling.liveGateway scales the live gateways: it needs spec.live"
type ConcordClusterSpec struct {
	// Image of the concord binary, used by every role.
	// +kubebuilder:validation:MinLength=1
	Image string `json:"image"`
	// ImagePullPolicy of every container.
	// +kubebuilder:default=IfNotPresent
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`
	// ImagePullSecrets for private registries.
	// +optional
	// +listType=atomic
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
	// ServerKeySecret holds the token signing key (at least 32 bytes) every
	// node shares (CONCORD_SERVER_KEY).
	// +optional
	ServerKeySecret *SecretKeyReference `json:"serverKeySecret,omitempty"`
	// Roles sizes each runtime role.
	// +kubebuilder:default={}
	// +optional
	Roles RolesSpec `json:"roles,omitempty"`
	// Storage is the Cassandra/ScyllaDB cluster holding messages and state.
	Storage StorageSpec `json:"storage"`
	// Kafka is the durable event log.
	Kafka KafkaSpec `json:"kafka"`
	// Redis holds counters, rate limits and session summaries.
	Redis RedisSpec `json:"redis"`
	// Etcd is the registry: guild ring, node leases, voice load, pins.
	Etcd EtcdSpec `json:"etcd"`
	// Live runs the live-comment roles (live-api, live-gateway, live-router,
	// live-archiver, live-relay, live-moderation) on the cluster's Kafka,
	// Redis, Cassandra and etcd; absent, none of them runs.
	// +optional
	Live *LiveSpec `json:"live,omitempty"`
	// TrustedProxies are the load balancers or ingress controllers in
	// front of the api, live-api and live-gateway Services (IP addresses
	// or CIDR ranges, e.g. the ingress controller's pod range): their
	// X-Forwarded-For or PROXY protocol header names the client, so REST
	// rate limits, invalid-request bans and logs see each client instead
	// of the ingress. Passed to those pods as --trusted-proxies
	// (CONCORD_TRUSTED_PROXIES); a GatewayPool has its own. Empty trusts
	// nobody.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.all(x, isIP(x) || isCIDR(x))",message="each trusted proxy is an IP address or a CIDR range"
	// +optional
	TrustedProxies []string `json:"trustedProxies,omitempty"`
	// AutoPlacement moves guilds with sustained high event age onto dedicated nodes.
	// +optional
	AutoPlacement *AutoPlacementPolicy `json:"autoPlacement,omitempty"`
	// Autoscaling scales guild nodes and relay tiers from event age.
	// +optional
	Autoscaling *AutoscalingPolicy `json:"autoscaling,omitempty"`
}

// RolesSpec sizes every runtime role of a cluster.
type RolesSpec struct {
	// API serves REST and the admin endpoint.
	// +kubebuilder:default={replicas: 2}
	// +optional
	API RoleSpec `json:"api,omitempty"`
	// Guild runs the guild actors (a StatefulSet: the ring needs stable names).
	// +kubebuilder:default={replicas: 3}
	// +optional
	Guild RoleSpec `json:"guild,omitempty"`
	// Data serves history reads with request coalescing.
	// +kubebuilder:default={replicas: 2}
	// +optional
	Data RoleSpec `json:"data,omitempty"`
	// ReadState counts unread messages and mentions.
	// +kubebuilder:default={replicas: 2}
	// +optional
	ReadState RoleSpec `json:"readstate,omitempty"`
	// Presence tracks online status.
	// +kubebuilder:default={replicas: 2}
	// +optional
	Presence RoleSpec `json:"presence,omitempty"`
	// Relay is the shared relay pool; big guilds get their own RelayTier.
	// +kubebuilder:default={replicas: 2}
	// +optional
	Relay RoleSpec `json:"relay,omitempty"`
}

// RoleSpec sizes one runtime role.
type RoleSpec struct {
	// Replicas of the role (defaults: guild 3, the others 2).
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
	// PodPlacement sets resources, node selector and tolerations.
	// +optional
	PodPlacement `json:",inline"`
	// MaxUnavailable of the role's PodDisruptionBudget (default 1).
	// +kubebuilder:validation:Minimum=0
	// +optional
	MaxUnavailable *int32 `json:"maxUnavailable,omitempty"`
}

// LiveSpec sizes the live-comment roles. Each role is its own Deployment,
// scaled independently; live-api and live-gateway get a ClusterIP Service,
// live-relay a headless one (its pods are addressed one by one).
type LiveSpec struct {
	// API serves the /v1/streams HTTP contract (posts, moderation,
	// scroll-back) and forwards SSE requests to a live-gateway.
	// +kubebuilder:default={replicas: 2}
	// +optional
	API RoleSpec `json:"api,omitempty"`
	// Gateway serves GET /v1/streams/{id}/live (SSE) to viewers.
	// +kubebuilder:default={replicas: 2}
	// +optional
	Gateway RoleSpec `json:"gateway,omitempty"`
	// Router consumes the event log and fans comments out to the gateways.
	// +kubebuilder:default={replicas: 2}
	// +optional
	Router RoleSpec `json:"router,omitempty"`
	// Archiver consumes the event log into the comment store.
	// +kubebuilder:default={replicas: 1}
	// +optional
	Archiver RoleSpec `json:"archiver,omitempty"`
	// Relay runs the nodes of the relay tree between the router and the
	// gateways: a stream's batches reach its gateways through the stream's
	// owner among them (and second-tier relays as audiences grow), one copy
	// per subscribing gateway. With replicas, the router and the gateways
	// run --live-relay=tree; with 0 replicas, --live-relay=redis (one Redis
	// pub/sub channel per stream).
	// +kubebuilder:default={replicas: 2}
	// +optional
	Relay RoleSpec `json:"relay,omitempty"`
	// Moderation scores every comment with the classifier and retracts
	// those above its threshold, banning repeat offenders (its own consumer
	// group on the comments topic).
	// +kubebuilder:default={replicas: 1}
	// +optional
	Moderation RoleSpec `json:"moderation,omitempty"`
	// Classifier is the moderation role's classifier (--live-classifier):
	// "linear" (the Go model shipped in the binary), "off" (nothing is
	// scored), or a KServe v2 / Triton inference server as
	// http(s)://host:port/MODEL. Empty: the runtime's default, linear.
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self == 'linear' || self == 'off' || self.matches(r'^https?://[^/\\s]+/[^\\s]+$')",message="classifier is linear, off or http(s)://host:port/MODEL"
	// +optional
	Classifier string `json:"classifier,omitempty"`
	// Prefix names the live topics, consumer groups and Redis keys
	// (--live-prefix; the runtime's default is "concord.live.").
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9._-]{0,64}$`
	// +optional
	Prefix string `json:"prefix,omitempty"`
}

// StorageSpec connects to Cassandra or ScyllaDB.
type StorageSpec struct {
	// ContactPoints are host:port addresses of the CQL native transport.
	// +kubebuilder:validation:MinItems=1
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=261
	// +kubebuilder:validation:XValidation:rule="self.all(h, h.matches(r'^([^/\\s:\\[\\]]+|\\[[0-9a-fA-F:.]+\\])(:[0-9]{1,5})?$'))",message="each contact point is host or host:port, without a scheme"
	ContactPoints []string `json:"contactPoints"`
	// Keyspace holding Concord's tables.
	// +kubebuilder:default=concord
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9_]{0,47}$`
	// +optional
	Keyspace string `json:"keyspace,omitempty"`
	// LocalDatacenter for token- and DC-aware routing.
	// +optional
	LocalDatacenter string `json:"localDatacenter,omitempty"`
	// Consistency of writes and reads.
	// +kubebuilder:default=LOCAL_QUORUM
	// +kubebuilder:validation:Enum=ONE;LOCAL_ONE;QUORUM;LOCAL_QUORUM;ALL
	// +optional
	Consistency string `json:"consistency,omitempty"`
	// UsernameSecret and PasswordSecret hold CQL credentials.
	// +optional
	UsernameSecret *SecretKeyReference `json:"usernameSecret,omitempty"`
	// PasswordSecret holds the CQL password.
	// +optional
	PasswordSecret *SecretKeyReference `json:"passwordSecret,omitempty"`
}

// KafkaSpec connects to Kafka.
type KafkaSpec struct {
	// Brokers are bootstrap host:port addresses.
	// +kubebuilder:validation:MinItems=1
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=261
	// +kubebuilder:validation:XValidation:rule="self.all(b, b.matches(r'^([^/\\s:\\[\\]]+|\\[[0-9a-fA-F:.]+\\]):[0-9]{1,5}$'))",message="each broker is host:port, without a scheme"
	Brokers []string `json:"brokers"`
	// TopicPrefix is prepended to every topic name.
	// +kubebuilder:default=concord.
	// +optional
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9._-]{0,200}$`
	TopicPrefix string `json:"topicPrefix,omitempty"`
	// SASLSecret holds "username" and "password" keys for SASL/SCRAM.
	// +optional
	SASLSecret *corev1.LocalObjectReference `json:"saslSecret,omitempty"`
	// TLS enables TLS to the brokers.
	// +optional
	TLS bool `json:"tls,omitempty"`
}

// RedisSpec connects to Redis.
type RedisSpec struct {
	// Address is host:port of Redis.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=261
	// +kubebuilder:validation:XValidation:rule="self.matches(r'^([^/\\s:\\[\\]]+|\\[[0-9a-fA-F:.]+\\]):[0-9]{1,5}$')",message="address is host:port, without a scheme"
	Address string `json:"address"`
	// DB is the logical database number.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=15
	// +optional
	DB int32 `json:"db,omitempty"`
	// PasswordSecret holds the Redis password.
	// +optional
	PasswordSecret *SecretKeyReference `json:"passwordSecret,omitempty"`
}

// EtcdSpec connects to the etcd cluster used as the registry.
type EtcdSpec struct {
	// Endpoints are etcd client URLs.
	// +kubebuilder:validation:MinItems=1
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=261
	// +kubebuilder:validation:XValidation:rule="self.all(e, e.matches(r'^(https?://)?([^/\\s:\\[\\]]+|\\[[0-9a-fA-F:.]+\\]):[0-9]{1,5}$'))",message="each endpoint is [http(s)://]host:port"
	Endpoints []string `json:"endpoints"`
	// Prefix of every registry key.
	// +kubebuilder:default=/concord/
	// +kubebuilder:validation:Pattern=`^(/[A-Za-z0-9._-]+)*/?$`
	// +optional
	Prefix string `json:"prefix,omitempty"`
	// TLSSecret holds "ca.crt", "tls.crt" and "tls.key".
	// +optional
	TLSSecret *corev1.LocalObjectReference `json:"tlsSecret,omitempty"`
}

// AutoPlacementPolicy decides when the autoscaler pins a guild to a
// dedicated node and when it releases it.
// +kubebuilder:validation:XValidation:rule="!has(self.releaseBelow) || !has(self.eventAgeThreshold) || duration(self.releaseBelow) < duration(self.eventAgeThreshold)",message="releaseBelow must be lower than eventAgeThreshold (hysteresis)"
type AutoPlacementPolicy struct {
	// Enabled turns automatic placement on.
	// +kubebuilder:default=true
	// +optional
	Enabled bool `json:"enabled"`
	// EventAgeThreshold is the per-guild event-age p99 (queue entry →
	// dispatch) above which a guild is a candidate for a dedicated node.
	// +kubebuilder:default="250ms"
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="eventAgeThreshold must be positive"
	EventAgeThreshold *metav1.Duration `json:"eventAgeThreshold,omitempty"`
	// SustainFor is how long the threshold must be exceeded continuously.
	// +kubebuilder:default="2m"
	// +optional
	SustainFor *metav1.Duration `json:"sustainFor,omitempty"`
	// ReleaseBelow is the event-age p99 under which an automatic placement is
	// released once it has lasted ReleaseAfter.
	// +kubebuilder:default="50ms"
	// +optional
	ReleaseBelow *metav1.Duration `json:"releaseBelow,omitempty"`
	// ReleaseAfter is how long event age must stay under ReleaseBelow.
	// +kubebuilder:default="30m"
	// +optional
	ReleaseAfter *metav1.Duration `json:"releaseAfter,omitempty"`
	// Cooldown between two placement decisions of the whole cluster.
	// +kubebuilder:default="5m"
	// +optional
	Cooldown *metav1.Duration `json:"cooldown,omitempty"`
	// MaxDedicated bounds the number of automatic placements.
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=0
	// +optional
	MaxDedicated int32 `json:"maxDedicated,omitempty"`
	// DedicatedPool is where automatic placements run.
	// +optional
	DedicatedPool PodPlacement `json:"dedicatedPool,omitempty"`
}

// AutoscalingPolicy scales guild nodes and relay tiers.
type AutoscalingPolicy struct {
	// Guild scales the guild StatefulSet.
	// +optional
	Guild *GuildAutoscaling `json:"guild,omitempty"`
	// Relays creates and resizes RelayTiers for big guilds.
	// +optional
	Relays *RelayAutoscaling `json:"relays,omitempty"`
	// LiveGateway scales the live-gateway role (spec.live) from the
	// viewers the gateways report to the stream directory.
	// +optional
	LiveGateway *LiveGatewayAutoscaling `json:"liveGateway,omitempty"`
}

// LiveGatewayAutoscaling sizes the live-gateway Deployment to the viewers
// it carries: replicas = ceil(viewers / ViewersPerGateway) within
// [MinReplicas, MaxReplicas], more at once, fewer only once the
// recommendation has stayed lower for ScaleDownAfter (the highest
// recommendation of that window wins, so it does not flap). The viewers
// are the gateways' per-stream reports in the registry (the stream
// directory, live/viewers/<stream>/<gateway>, 15 s TTL); while they cannot
// be read the replicas stay as they are.
// +kubebuilder:validation:XValidation:rule="!has(self.minReplicas) || !has(self.maxReplicas) || self.minReplicas <= self.maxReplicas",message="liveGateway.minReplicas must not exceed maxReplicas"
type LiveGatewayAutoscaling struct {
	// ViewersPerGateway is the viewers one live gateway is sized for (the
	// stream directory's per-stream width, 25,000, by default).
	// +kubebuilder:default=25000
	// +kubebuilder:validation:Minimum=1
	// +optional
	ViewersPerGateway int64 `json:"viewersPerGateway,omitempty"`
	// MinReplicas of the live-gateway role (room for a failed
	// neighbour's viewers on a quiet fleet).
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=1
	// +optional
	MinReplicas int32 `json:"minReplicas,omitempty"`
	// MaxReplicas of the live-gateway role.
	// +kubebuilder:default=100
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxReplicas int32 `json:"maxReplicas,omitempty"`
	// ScaleDownAfter is the stabilisation window: the role shrinks only to
	// the highest replica count recommended over this window, and not
	// before the autoscaler has read the viewers for that long (after a
	// restart or a missing signal). Growing is at once.
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="scaleDownAfter must not be negative"
	// +optional
	ScaleDownAfter *metav1.Duration `json:"scaleDownAfter,omitempty"`
}

// GuildAutoscaling scales guild nodes on event age and queue length.
type GuildAutoscaling struct {
	// MinReplicas of the guild role.
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=1
	// +optional
	MinReplicas int32 `json:"minReplicas,omitempty"`
	// MaxReplicas of the guild role.
	// +kubebuilder:default=20
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxReplicas int32 `json:"maxReplicas,omitempty"`
	// TargetEventAge is the node-level event-age p99 to stay under; above it
	// the role scales up, under half of it the role scales down.
	// +kubebuilder:default="100ms"
	// +optional
	TargetEventAge *metav1.Duration `json:"targetEventAge,omitempty"`
	// ScaleUpCooldown between two scale-ups.
	// +kubebuilder:default="3m"
	// +optional
	ScaleUpCooldown *metav1.Duration `json:"scaleUpCooldown,omitempty"`
	// ScaleDownCooldown between two scale-downs (and after a scale-up).
	// +kubebuilder:default="15m"
	// +optional
	ScaleDownCooldown *metav1.Duration `json:"scaleDownCooldown,omitempty"`
}

// RelayAutoscaling creates RelayTiers for guilds that outgrow direct fan-out.
type RelayAutoscaling struct {
	// MinOnline is the online-session count above which a guild gets a RelayTier.
	// +kubebuilder:default=15000
	// +kubebuilder:validation:Minimum=1
	// +optional
	MinOnline int64 `json:"minOnline,omitempty"`
	// MaxRelays of the tiers the autoscaler creates.
	// +kubebuilder:default=20
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxRelays int32 `json:"maxRelays,omitempty"`
	// Cooldown between two resizes of one tier.
	// +kubebuilder:default="5m"
	// +optional
	Cooldown *metav1.Duration `json:"cooldown,omitempty"`
}

// RoleStatus is the observed state of one runtime role.
type RoleStatus struct {
	// Name of the role.
	Name string `json:"name"`
	// Replicas desired.
	Replicas int32 `json:"replicas"`
	// ReadyReplicas observed.
	ReadyReplicas int32 `json:"readyReplicas"`
}

// ConcordClusterStatus is the observed state of a Concord platform.
type ConcordClusterStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready, Progressing, Degraded.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Roles reports each runtime role.
	// +optional
	// +listType=map
	// +listMapKey=name
	Roles []RoleStatus `json:"roles,omitempty"`
	// ReadyRoles is "ready/total" roles, for printing.
	// +optional
	ReadyRoles string `json:"readyRoles,omitempty"`
	// DedicatedGuilds counts GuildPlacements of this cluster.
	// +optional
	DedicatedGuilds int32 `json:"dedicatedGuilds,omitempty"`
	// LiveGateway is what the autoscaler last read and decided for the
	// live-gateway role (spec.autoscaling.liveGateway).
	// +optional
	LiveGateway *LiveGatewayScaleStatus `json:"liveGateway,omitempty"`
}

// LiveGatewayScaleStatus is the live-gateway autoscaler's last round.
type LiveGatewayScaleStatus struct {
	// Viewers is the total of the gateways' fresh viewer reports.
	// +optional
	Viewers int64 `json:"viewers"`
	// Gateways is how many gateways reported viewers.
	// +optional
	Gateways int32 `json:"gateways"`
	// BusiestGatewayViewers is the viewers of the busiest gateway.
	// +optional
	BusiestGatewayViewers int64 `json:"busiestGatewayViewers"`
	// RecommendedReplicas is ceil(viewers / viewersPerGateway) within
	// [minReplicas, maxReplicas] this round.
	// +optional
	RecommendedReplicas int32 `json:"recommendedReplicas"`
	// Replicas is the live-gateway replica count after this round.
	// +optional
	Replicas int32 `json:"replicas"`
	// SignalOK is false when the viewers could not be read this round (the
	// replicas were kept); Message then says why.
	// +optional
	SignalOK bool `json:"signalOK"`
	// Message explains the last round: the decision or why there was none.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Message string `json:"message,omitempty"`
	// ObservedAt is when the round ran.
	// +optional
	ObservedAt metav1.Time `json:"observedAt,omitempty"`
	// LastScaleTime is when the autoscaler last changed the replicas.
	// +optional
	LastScaleTime *metav1.Time `json:"lastScaleTime,omitempty"`
}

// ConcordCluster is a Concord platform: every runtime role except gateways
// (GatewayPool) and voice (VoiceRegion), the live-comment roles when
// spec.live is set, plus its connections to Cassandra,
// Kafka, Redis and etcd.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ccl,categories=concord
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.image`,priority=1
// +kubebuilder:printcolumn:name="Roles",type=string,JSONPath=`.status.readyRoles`
// +kubebuilder:printcolumn:name="Dedicated",type=integer,JSONPath=`.status.dedicatedGuilds`
// +kubebuilder:printcolumn:name="Viewers",type=integer,JSONPath=`.status.liveGateway.viewers`,priority=1
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ConcordCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state.
	Spec ConcordClusterSpec `json:"spec"`
	// Status is the observed state.
	// +optional
	Status ConcordClusterStatus `json:"status,omitempty"`
}

// ConcordClusterList is a list of ConcordClusters.
//
// +kubebuilder:object:root=true
type ConcordClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the clusters.
	Items []ConcordCluster `json:"items"`
}

func init() {
	register(&ConcordCluster{}, &ConcordClusterList{})
}
