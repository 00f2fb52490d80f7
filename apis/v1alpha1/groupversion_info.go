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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every type in this package.
	GroupVersion = schema.GroupVersion{Group: "concord.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// knownTypes are the package's types, each file adding its own with
// register from init.
var knownTypes []runtime.Object

// register adds objects to the types AddToScheme registers.
func register(objects ...runtime.Object) { knownTypes = append(knownTypes, objects...) }

// addKnownTypes registers knownTypes and the group version's meta types
// with s.
func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, knownTypes...)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
