// Package v1alpha1 contains the API types of Concord's operator, group
// concord.dev: ConcordCluster (the platform), GatewayPool (a fleet of gateway
// pods for one client class), GuildPlacement (one guild pinned to a dedicated
// node), RelayTier (relays for big guilds) and VoiceRegion (a regional SFU
// fleet).
//
// +kubebuilder:object:generate=true
// +groupName=concord.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every type in this package.
	GroupVersion = schema.GroupVersion{Group: "concord.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
