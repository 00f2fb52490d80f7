package podadmin

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
	"github.com/concord-chat/concord/runtime/edge/adminauth"
)

// The pods' admin endpoints require the cluster's admin token, which every
// node derives from the token-signing key it is given
// (spec.serverKeySecret); the client derives the same token from the same
// secret. It reads the ConcordCluster and the secret through Config.Reader
// (the manager's API reader: no cache, so only "get" on secrets).

// +kubebuilder:rbac:groups="",resources=secrets,verbs=get

// ErrNoServerKey is returned for a pod whose cluster names no server key
// secret: its nodes have no shared admin token the operator can know.
var ErrNoServerKey = errors.New("podadmin: the cluster has no spec.serverKeySecret")

// token returns the admin token of p's cluster ("" without Config.Reader:
// tests against unguarded servers).
func (c *Client) token(ctx context.Context, p *corev1.Pod) (string, error) {
	if c.cfg.Reader == nil {
		return "", nil
	}
	name := p.Labels[concordv1.LabelCluster]
	if name == "" {
		return "", fmt.Errorf("podadmin: pod %s/%s has no %s label", p.Namespace, p.Name, concordv1.LabelCluster)
	}
	return ClusterToken(ctx, c.cfg.Reader, p.Namespace, name)
}

// ClusterToken returns the admin token of the ConcordCluster namespace/name,
// derived from its server key secret (kubectl-concord uses it too).
func ClusterToken(ctx context.Context, r client.Reader, namespace, name string) (string, error) {
	var cl concordv1.ConcordCluster
	if err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &cl); err != nil {
		return "", fmt.Errorf("podadmin: cluster %s/%s: %w", namespace, name, err)
	}
	ref := cl.Spec.ServerKeySecret
	if ref == nil {
		return "", fmt.Errorf("%w: %s/%s", ErrNoServerKey, namespace, name)
	}
	var s corev1.Secret
	if err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, &s); err != nil {
		return "", fmt.Errorf("podadmin: server key secret of %s/%s: %w", namespace, name, err)
	}
	key := s.Data[ref.Key]
	if len(key) == 0 {
		return "", fmt.Errorf("podadmin: secret %s/%s has no key %q", namespace, ref.Name, ref.Key)
	}
	return adminauth.Derive(key), nil
}
