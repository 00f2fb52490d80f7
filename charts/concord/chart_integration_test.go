//go:build integration

package concord

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

var k8s client.Client

func TestMain(m *testing.M) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "FAIL: KUBEBUILDER_ASSETS is unset. The chart's dry-run tests need a real kube-apiserver and etcd:\n"+
			"  run `make test`, or\n"+
			"  export KUBEBUILDER_ASSETS=$(hack/envtest/build.sh) && go test -tags integration ./charts/...")
		os.Exit(1)
	}
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = apiextensionsv1.AddToScheme(s)
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{"crds"},
		ErrorIfCRDPathMissing: true,
		// The Prometheus Operator's ServiceMonitor, PrometheusRule and
		// PodMonitor, reduced to open schemas.
		CRDs: []*apiextensionsv1.CustomResourceDefinition{
			monitoringCRD("servicemonitors", "servicemonitor", "ServiceMonitor"),
			monitoringCRD("prometheusrules", "prometheusrule", "PrometheusRule"),
			monitoringCRD("podmonitors", "podmonitor", "PodMonitor"),
		},
	}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: start envtest:", err)
		os.Exit(1)
	}
	k8s, err = client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: client:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}

// monitoringCRD is a monitoring.coreos.com/v1 kind with an open schema.
func monitoringCRD(plural, singular, kind string) *apiextensionsv1.CustomResourceDefinition {
	open := true
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + ".monitoring.coreos.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "monitoring.coreos.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Singular: singular, Kind: kind, ListKind: kind + "List"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: &open}}}},
		},
	}
}

// TestDryRunApply renders the chart with every values file and applies each
// object with a server-side dry run: the API server checks the CRDs' schemas
// and CEL rules against the rendered ConcordCluster and GatewayPools, and
// every built-in object against its API.
func TestDryRunApply(t *testing.T) {
	ctx := context.Background()
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "concord-system"}}); err != nil {
		t.Fatal(err)
	}
	for _, f := range valuesFiles(t) {
		objs := render(t, f)
		for _, o := range objs {
			err := k8s.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("chart-test"), client.ForceOwnership, client.DryRunAll)
			if err != nil {
				y, _ := yaml.Marshal(o.Object)
				t.Errorf("values %q: dry-run apply %s %s: %v\n%s", filepath.Base(f), o.GetKind(), o.GetName(), err, y)
			}
		}
		t.Logf("values %q: %d objects accepted", f, len(objs))
	}
}
