package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
)

// Condition types shared by every Concord resource.
const (
	// ConditionReady is True when the resource's workload serves traffic as
	// specified.
	ConditionReady = "Ready"
	// ConditionProgressing is True while the operator converges the workload
	// towards the spec (scaling, rolling out, draining, moving a guild).
	ConditionProgressing = "Progressing"
	// ConditionDegraded is True when the operator cannot converge (invalid
	// reference, API errors, drain timeouts).
	ConditionDegraded = "Degraded"
)

// Finalizer is the finalizer the operator puts on resources whose deletion
// needs work outside Kubernetes (registry pins, relay lists, drains).
const Finalizer = "concord.dev/finalizer"

// Well-known labels and annotations set on the pods the operator manages.
const (
	// LabelCluster names the ConcordCluster a pod belongs to.
	LabelCluster = "concord.dev/cluster"
	// LabelRole is the runtime role of a pod (api, guild, gateway, relay, voice…).
	LabelRole = "concord.dev/role"
	// LabelOwner names the custom resource that created a pod.
	LabelOwner = "concord.dev/owner"
	// LabelGuild carries the guild id of dedicated guild nodes and relays.
	LabelGuild = "concord.dev/guild"
	// LabelPod carries a pod's own name, for per-pod Services.
	LabelPod = "concord.dev/pod"
	// LabelRevision is the pod-template hash of a GatewayPool pod.
	LabelRevision = "concord.dev/revision"

	// AnnotationDraining marks a pod the operator is draining; the value is
	// the RFC 3339 time the drain started.
	AnnotationDraining = "concord.dev/draining"
	// AnnotationDrainRequested asks the operator to drain a gateway pod
	// (`kubectl concord gateway drain`); a replacement keeps the pool's size.
	AnnotationDrainRequested = "concord.dev/drain-requested"
	// AnnotationDrainAcknowledged records that the pod accepted its drain
	// request, so polls only read its state.
	AnnotationDrainAcknowledged = "concord.dev/drain-acknowledged"
	// AnnotationDrainSuccessor names the pod that receives a draining gateway's
	// sessions.
	AnnotationDrainSuccessor = "concord.dev/drain-successor"

	// ReadinessGateServing is the pod readiness gate the operator turns off to
	// take a pod out of Service endpoints before draining it.
	ReadinessGateServing corev1.PodConditionType = "concord.dev/serving"
)

// ClusterReference names the ConcordCluster, in the same namespace, that a
// resource belongs to.
type ClusterReference struct {
	// Name of the ConcordCluster.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// SecretKeyReference selects one key of a Secret in the resource's namespace.
type SecretKeyReference struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Key inside the Secret.
	// +kubebuilder:validation:MinLength=1
	Key string `json:"key"`
}

// PodPlacement is where and how big the pods of a workload are.
type PodPlacement struct {
	// Resources of the main container.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`
	// NodeSelector restricts the pods to matching nodes.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Tolerations let the pods run on tainted (dedicated) nodes.
	// +optional
	// +listType=atomic
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
}
