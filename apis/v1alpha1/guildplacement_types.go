package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PlacementPhase is where a GuildPlacement is in its life.
// +kubebuilder:validation:Enum=Pending;Moving;Placed;Releasing
type PlacementPhase string

// Placement phases: Pending → Moving → Placed → Releasing.
const (
	// PlacementPending: the dedicated guild-node pod is starting.
	PlacementPending PlacementPhase = "Pending"
	// PlacementMoving: the pin is written; the old actor flushes and stops,
	// the new one loads from the store and sessions resubscribe.
	PlacementMoving PlacementPhase = "Moving"
	// PlacementPlaced: the guild runs on the dedicated node.
	PlacementPlaced PlacementPhase = "Placed"
	// PlacementReleasing: the pin is removed and the guild returns to the ring.
	PlacementReleasing PlacementPhase = "Releasing"
)

// Placement sources, recorded in the concord.dev/placed-by label.
const (
	// LabelPlacedBy says who created a GuildPlacement: "autoscaler" or a user.
	LabelPlacedBy = "concord.dev/placed-by"
	// PlacedByAutoscaler marks placements the autoscaler may release.
	PlacedByAutoscaler = "autoscaler"
)

// GuildPlacementSpec pins one guild's actor to a dedicated node.
type GuildPlacementSpec struct {
	// ClusterRef names the ConcordCluster.
	ClusterRef ClusterReference `json:"clusterRef"`
	// GuildID is the guild's snowflake.
	// +kubebuilder:validation:Pattern=`^[0-9]{1,20}$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="guildID is immutable; create another GuildPlacement"
	GuildID string `json:"guildID"`
	// PodPlacement selects the dedicated node pool and sizes the guild node.
	// +optional
	PodPlacement `json:",inline"`
	// MoveTimeout bounds Pending, Moving and Releasing; past it the
	// placement is Degraded (MoveTimeout) and a release proceeds anyway.
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="moveTimeout must be positive"
	// +optional
	MoveTimeout *metav1.Duration `json:"moveTimeout,omitempty"`
	// Reason is a free-form note (the autoscaler records the event age it saw).
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Reason string `json:"reason,omitempty"`
}

// GuildPlacementStatus is the observed state of a placement.
type GuildPlacementStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready (Placed), Progressing, Degraded.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Phase is Pending, Moving, Placed or Releasing.
	// +optional
	Phase PlacementPhase `json:"phase,omitempty"`
	// PodName of the dedicated guild node.
	// +optional
	PodName string `json:"podName,omitempty"`
	// NodeName the dedicated pod runs on.
	// +optional
	NodeName string `json:"nodeName,omitempty"`
	// Owner is the registry node id currently running the guild's actor.
	// +optional
	Owner string `json:"owner,omitempty"`
	// PhaseSince is when the current phase began.
	// +optional
	PhaseSince *metav1.Time `json:"phaseSince,omitempty"`
}

// GuildPlacement pins one guild's actor to a dedicated guild-node pod on a
// dedicated node pool. Deleting it releases the guild back to the ring.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=gpl,categories=concord
// +kubebuilder:printcolumn:name="Guild",type=string,JSONPath=`.spec.guildID`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Pod",type=string,JSONPath=`.status.podName`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.status.nodeName`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type GuildPlacement struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state.
	Spec GuildPlacementSpec `json:"spec"`
	// Status is the observed state.
	// +optional
	Status GuildPlacementStatus `json:"status,omitempty"`
}

// GuildPlacementList is a list of GuildPlacements.
//
// +kubebuilder:object:root=true
type GuildPlacementList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the placements.
	Items []GuildPlacement `json:"items"`
}

func init() {
	register(&GuildPlacement{}, &GuildPlacementList{})
}
