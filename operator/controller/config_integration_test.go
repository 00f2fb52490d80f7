//go:build integration

package controller

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
)

// decodeAll splits a multi-document YAML stream into objects.
func decodeAll(t *testing.T, b []byte) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("decode: %v", err)
		}
		if len(m) > 0 {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
}

// TestSamplesApply creates every sample of config/samples (one per kind) in
// a fresh namespace: the API server validates them against the CRDs, and the
// operator reconciles them.
func TestSamplesApply(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	files, err := filepath.Glob(filepath.Join("..", "..", "config", "samples", "concord_*.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	var kinds []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		g.Expect(err).NotTo(HaveOccurred())
		for _, o := range decodeAll(t, b) {
			o.SetNamespace(ns)
			g.Expect(k8s.Create(ctx, o)).To(Succeed(), "sample %s", f)
			kinds = append(kinds, o.GetKind())
		}
	}
	slices.Sort(kinds)
	g.Expect(kinds).To(Equal([]string{"ConcordCluster", "GatewayPool", "GuildPlacement", "RelayTier", "VoiceRegion"}))
	// The samples are live: the cluster becomes a fleet, the pool gets pods.
	g.Eventually(func(g Gomega) {
		var c concordv1.ConcordCluster
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "prod"}, &c)).To(Succeed())
		g.Expect(c.Status.ObservedGeneration).To(Equal(c.Generation))
		g.Expect(c.Spec.AutoPlacement.SustainFor.Duration.String()).To(Equal("2m0s"))
		g.Expect(listPods(g, ns, map[string]string{concordv1.LabelOwner: "users"})).To(HaveLen(4))
	}, timeout, poll).Should(Succeed())
}

// TestKustomizeDefault builds config/default with kustomize and applies the
// result with a server-side dry run.
func TestKustomizeDefault(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).
		Run(filesys.MakeFsOnDisk(), filepath.Join("..", "..", "config", "default"))
	g.Expect(err).NotTo(HaveOccurred())
	b, err := resMap.AsYaml()
	g.Expect(err).NotTo(HaveOccurred())
	objs := decodeAll(t, b)
	g.Expect(len(objs)).To(BeNumerically(">=", 20))
	// The namespace must exist for namespaced dry runs.
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "concord-system"}}
	_ = k8s.Create(ctx, nsObj)
	for _, o := range objs {
		y, _ := yaml.Marshal(o.Object)
		err := k8s.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("config-test"), client.ForceOwnership, client.DryRunAll)
		g.Expect(err).NotTo(HaveOccurred(), "server-side dry-run apply of\n%s", y)
	}
}
