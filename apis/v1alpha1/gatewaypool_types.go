package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClientClass is the kind of client a GatewayPool serves.
// +kubebuilder:validation:Enum=users;bots;live
type ClientClass string

// Client classes.
const (
	ClientClassUsers ClientClass = "users"
	ClientClassBots  ClientClass = "bots"
	ClientClassLive  ClientClass = "live"
)

// GatewayPoolSpec is the desired state of a fleet of gateway pods.
// +kubebuilder:validation:XValidation:rule="!has(self.port) || !has(self.adminPort) || self.port != self.adminPort",message="port and adminPort must differ"
type GatewayPoolSpec struct {
	// ClusterRef names the ConcordCluster the gateways connect to.
	ClusterRef ClusterReference `json:"clusterRef"`
	// ClientClass is the kind of client: people's apps, bots or live viewers.
	// +kubebuilder:default=users
	// +optional
	ClientClass ClientClass `json:"clientClass,omitempty"`
	// Replicas is the number of serving (non-draining) gateway pods.
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
	// SessionsPerPod is the target number of sessions per pod; the identify
	// admission rate and the autoscaling hint derive from it.
	// +kubebuilder:default=50000
	// +kubebuilder:validation:Minimum=1
	// +optional
	SessionsPerPod int32 `json:"sessionsPerPod,omitempty"`
	// Image overrides the cluster's image.
	// +optional
	Image string `json:"image,omitempty"`
	// Port is the WebSocket listener of each pod.
	// +kubebuilder:default=8080
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port int32 `json:"port,omitempty"`
	// AdminPort is the admin listener of each pod (POST/GET /admin/drain,
	// /metrics); unset means 9090. When it equals Port, the WebSocket
	// listener serves /admin itself.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	AdminPort int32 `json:"adminPort,omitempty"`
	// TrustedProxies are the load balancers in front of the pool (IP
	// addresses or CIDR ranges, e.g. the ingress controller's pod range or
	// the cloud load balancer's) whose PROXY protocol v1/v2 header or
	// X-Forwarded-For names the client's address; the per-address
	// connection cap and the logs then see each client instead of the
	// balancer. Passed to each pod as --trusted-proxies
	// (CONCORD_TRUSTED_PROXIES). Empty trusts nobody.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.all(x, isIP(x) || isCIDR(x))",message="each trusted proxy is an IP address or a CIDR range"
	// +optional
	TrustedProxies []string `json:"trustedProxies,omitempty"`
	// PodPlacement sets resources, node selector and tolerations.
	// +optional
	PodPlacement `json:",inline"`
	// Drain is how pods leave the pool.
	// +kubebuilder:default={}
	// +optional
	Drain DrainPolicy `json:"drain,omitempty"`
}

// DrainPolicy bounds how a gateway pod hands its sessions over before it is
// deleted.
// +kubebuilder:validation:XValidation:rule="!has(self.timeout) || duration(self.timeout) > duration('0s')",message="drain.timeout must be positive: a zero timeout deletes pods with their sessions"
// +kubebuilder:validation:XValidation:rule="!has(self.reconnectJitter) || duration(self.reconnectJitter) >= duration('0s')",message="drain.reconnectJitter must not be negative"
type DrainPolicy struct {
	// Timeout after which a draining pod is deleted even with sessions left;
	// those clients reconnect and resume elsewhere.
	// +kubebuilder:default="5m"
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// BatchSize is how many pods may drain at once.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +optional
	BatchSize int32 `json:"batchSize,omitempty"`
	// ReconnectJitter spreads the clients' reconnects (op 7) over this window.
	// +kubebuilder:default="10s"
	// +optional
	ReconnectJitter *metav1.Duration `json:"reconnectJitter,omitempty"`
}

// GatewayPoolStatus is the observed state of a gateway fleet.
type GatewayPoolStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready, Progressing, Degraded.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Replicas is the number of serving (non-draining) pods.
	// +optional
	Replicas int32 `json:"replicas"`
	// ReadyReplicas is the number of serving pods that are ready.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas"`
	// UpdatedReplicas is the number of serving pods on the current revision.
	// +optional
	UpdatedReplicas int32 `json:"updatedReplicas"`
	// DrainingPods is the number of pods handing their sessions over.
	// +optional
	DrainingPods int32 `json:"drainingPods"`
	// DrainingSessions is the number of sessions still on draining pods.
	// +optional
	DrainingSessions int64 `json:"drainingSessions"`
	// CurrentRevision is the hash of the current pod template.
	// +optional
	CurrentRevision string `json:"currentRevision,omitempty"`
	// Selector is the label selector of the pool's pods (for the scale subresource).
	// +optional
	Selector string `json:"selector,omitempty"`
}

// GatewayPool is a fleet of gateway pods for one client class. The operator,
// not a Deployment, picks which pod leaves on scale-down and rollouts, and
// drains it: sessions and replay buffers move to a successor and clients
// resume there (op 7).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:shortName=gwp,categories=concord
// +kubebuilder:printcolumn:name="Class",type=string,JSONPath=`.spec.clientClass`
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Draining",type=integer,JSONPath=`.status.drainingPods`
// +kubebuilder:printcolumn:name="Draining-Sessions",type=integer,JSONPath=`.status.drainingSessions`,priority=1
// +kubebuilder:printcolumn:name="Revision",type=string,JSONPath=`.status.currentRevision`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type GatewayPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state.
	Spec GatewayPoolSpec `json:"spec"`
	// Status is the observed state.
	// +optional
	Status GatewayPoolStatus `json:"status,omitempty"`
}

// GatewayPoolList is a list of GatewayPools.
//
// +kubebuilder:object:root=true
type GatewayPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the pools.
	Items []GatewayPool `json:"items"`
}

func init() {
	register(&GatewayPool{}, &GatewayPoolList{})
}
