package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RelayTierSpec is the desired state of the relays serving big guilds.
// +kubebuilder:validation:XValidation:rule="has(self.guildID) != has(self.guildSelector)",message="set exactly one of guildID and guildSelector"
// +kubebuilder:validation:XValidation:rule="!has(self.minRelays) || !has(self.maxRelays) || self.minRelays <= self.maxRelays",message="minRelays must not exceed maxRelays"
type RelayTierSpec struct {
	// ClusterRef names the ConcordCluster.
	ClusterRef ClusterReference `json:"clusterRef"`
	// GuildID is the one guild this tier serves.
	// +kubebuilder:validation:Pattern=`^[0-9]{1,20}$`
	// +optional
	GuildID string `json:"guildID,omitempty"`
	// GuildSelector makes the tier serve every guild matching it.
	// +optional
	GuildSelector *GuildSelector `json:"guildSelector,omitempty"`
	// SessionsPerRelay is how many sessions one relay fans out to.
	// +kubebuilder:default=15000
	// +kubebuilder:validation:Minimum=1
	// +optional
	SessionsPerRelay int64 `json:"sessionsPerRelay,omitempty"`
	// MinRelays is the lower bound.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +optional
	MinRelays int32 `json:"minRelays"`
	// MaxRelays is the upper bound.
	// +kubebuilder:default=20
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxRelays int32 `json:"maxRelays,omitempty"`
	// Port of the relay's gRPC listener.
	// +kubebuilder:default=7070
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port int32 `json:"port,omitempty"`
	// PodPlacement sets resources, node selector and tolerations.
	// +optional
	PodPlacement `json:",inline"`
}

// GuildSelector selects guilds by their live size.
type GuildSelector struct {
	// MinOnline selects guilds with at least this many online sessions.
	// +kubebuilder:validation:Minimum=1
	MinOnline int64 `json:"minOnline"`
}

// RelayTierStatus is the observed state of a relay tier.
type RelayTierStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready, Progressing, Degraded.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Online is the number of online sessions of the served guilds.
	// +optional
	Online int64 `json:"online"`
	// DesiredRelays is ceil(online / sessionsPerRelay) within the bounds.
	// +optional
	DesiredRelays int32 `json:"desiredRelays"`
	// Relays is the number of relay pods.
	// +optional
	Relays int32 `json:"relays"`
	// ReadyRelays is the number of ready relay pods written to the registry.
	// +optional
	ReadyRelays int32 `json:"readyRelays"`
	// Guilds are the guild ids the tier serves.
	// +optional
	// +listType=set
	Guilds []string `json:"guilds,omitempty"`
	// Endpoints are the relay addresses published in the registry.
	// +optional
	// +listType=atomic
	Endpoints []string `json:"endpoints,omitempty"`
}

// RelayTier runs ceil(online / sessionsPerRelay) relay pods (within bounds)
// for one big guild, or for every guild a selector matches, and publishes them
// in the registry for the guild actor.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=rt,categories=concord
// +kubebuilder:printcolumn:name="Guild",type=string,JSONPath=`.spec.guildID`
// +kubebuilder:printcolumn:name="Online",type=integer,JSONPath=`.status.online`
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.status.desiredRelays`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyRelays`
// +kubebuilder:printcolumn:name="Per-Relay",type=integer,JSONPath=`.spec.sessionsPerRelay`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type RelayTier struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state.
	Spec RelayTierSpec `json:"spec"`
	// Status is the observed state.
	// +optional
	Status RelayTierStatus `json:"status,omitempty"`
}

// RelayTierList is a list of RelayTiers.
//
// +kubebuilder:object:root=true
type RelayTierList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the tiers.
	Items []RelayTier `json:"items"`
}

func init() {
	register(&RelayTier{}, &RelayTierList{})
}
