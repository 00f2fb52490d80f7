// Package concord holds the tests of the Helm chart: lint, render with every
// values file in ci/, and (with -tags integration) apply the rendered
// manifests to a real API server with a server-side dry run.
package concord

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint/support"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// valuesFiles are the chart's test values (ci/*.yaml), plus "" for defaults.
func valuesFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("ci", "*.yaml"))
	if err != nil || len(files) < 3 {
		t.Fatalf("want at least 3 values files in ci/, got %v (%v)", files, err)
	}
	return append([]string{""}, files...)
}

func readValues(t *testing.T, file string) map[string]any {
	t.Helper()
	if file == "" {
		return map[string]any{}
	}
	v, err := chartutil.ReadValuesFile(file)
	if err != nil {
		t.Fatalf("read %s: %v", file, err)
	}
	return v.AsMap()
}

// render templates the chart like `helm template --include-crds`.
func render(t *testing.T, file string) []*unstructured.Unstructured {
	t.Helper()
	ch, err := loader.Load(".")
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}
	inst := action.NewInstall(&action.Configuration{})
	inst.DryRun, inst.ClientOnly, inst.Replace, inst.IncludeCRDs = true, true, true, true
	inst.ReleaseName, inst.Namespace = "concord", "concord-system"
	inst.KubeVersion = &chartutil.KubeVersion{Version: "v1.37.2", Major: "1", Minor: "37"}
	rel, err := inst.Run(ch, readValues(t, file))
	if err != nil {
		t.Fatalf("template with %q: %v", file, err)
	}
	return decode(t, rel.Manifest)
}

func decode(t *testing.T, manifest string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(manifest)), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("decode manifest: %v", err)
		}
		if len(m) > 0 {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
}

func kinds(objs []*unstructured.Unstructured) map[string]int {
	k := map[string]int{}
	for _, o := range objs {
		k[o.GetKind()]++
	}
	return k
}

func TestLint(t *testing.T) {
	for _, f := range valuesFiles(t) {
		l := action.NewLint()
		l.Strict = true
		res := l.Run([]string{"."}, readValues(t, f))
		for _, m := range res.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("lint %q: %s", f, m)
			}
		}
		for _, err := range res.Errors {
			t.Errorf("lint %q: %v", f, err)
		}
	}
}

func TestTemplate(t *testing.T) {
	def := kinds(render(t, ""))
	for kind, n := range map[string]int{"CustomResourceDefinition": 5, "Deployment": 1, "ClusterRole": 1, "ClusterRoleBinding": 1,
		"Role": 1, "RoleBinding": 1, "ServiceAccount": 1, "Service": 1} {
		if def[kind] != n {
			t.Errorf("defaults: %d %s, want %d (all: %v)", def[kind], kind, n, def)
		}
	}
	if def["ConcordCluster"]+def["GatewayPool"]+def["NetworkPolicy"]+def["ServiceMonitor"]+def["PrometheusRule"]+def["PodMonitor"]+def["ConfigMap"] != 0 {
		t.Errorf("defaults render optional objects: %v", def)
	}

	full := render(t, filepath.Join("ci", "full-values.yaml"))
	k := kinds(full)
	for kind, n := range map[string]int{"ConcordCluster": 1, "GatewayPool": 2, "NetworkPolicy": 1, "ServiceMonitor": 1, "PrometheusRule": 1, "PodMonitor": 1, "Deployment": 2,
		"ConfigMap": 7} {
		if k[kind] != n {
			t.Errorf("full: %d %s, want %d (all: %v)", k[kind], kind, n, k)
		}
	}
	for _, o := range full {
		switch o.GetKind() {
		case "GatewayPool":
			if ref, _, _ := unstructured.NestedString(o.Object, "spec", "clusterRef", "name"); ref != "prod" {
				t.Errorf("GatewayPool %s clusterRef = %q, want the chart's cluster", o.GetName(), ref)
			}
			// trustedProxies defaults to the chart's; a pool's own wins.
			want := map[string]string{"users": "10.0.0.0/8,192.0.2.7", "bots": "198.51.100.0/24"}[o.GetName()]
			if tp, _, _ := unstructured.NestedStringSlice(o.Object, "spec", "trustedProxies"); strings.Join(tp, ",") != want {
				t.Errorf("GatewayPool %s trustedProxies = %q, want %q", o.GetName(), tp, want)
			}
		case "NetworkPolicy":
			b, _ := utilyamlMarshal(o)
			for _, cidr := range []string{"169.254.0.0/16", "10.0.0.0/8", "fc00::/7"} {
				if !strings.Contains(b, cidr) {
					t.Errorf("egress NetworkPolicy does not deny %s", cidr)
				}
			}
		case "Deployment":
			if !strings.HasSuffix(o.GetName(), "-egress") {
				continue
			}
			// The egress pods run `concord egress` (the proxy), on the port
			// their Service targets.
			cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			args, _, _ := unstructured.NestedStringSlice(cs[0].(map[string]any), "args")
			if len(args) < 2 || args[0] != "egress" || !strings.HasPrefix(args[1], "--http=0.0.0.0:") {
				t.Errorf("egress deployment args = %q, want [egress --http=0.0.0.0:<port> ...]", args)
			}
		case "PodMonitor":
			eps, _, _ := unstructured.NestedSlice(o.Object, "spec", "podMetricsEndpoints")
			sel, _, _ := unstructured.NestedStringMap(o.Object, "spec", "selector", "matchLabels")
			if len(eps) != 1 || eps[0].(map[string]any)["port"] != "admin" || sel["app.kubernetes.io/managed-by"] != "concord-operator" {
				t.Errorf("PodMonitor does not scrape the operator's pods on admin: %v %v", eps, sel)
			}
		case "PrometheusRule":
			// The generated rules (internal/observability) are the spec,
			// verbatim: the shadow check's alert among them, its
			// description's Prometheus template left for Prometheus.
			groups, _, _ := unstructured.NestedSlice(o.Object, "spec", "groups")
			b, _ := utilyamlMarshal(o)
			alerts := map[string]map[string]any{}
			for _, g := range groups {
				rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
				for _, r := range rules {
					rule := r.(map[string]any)
					alerts[rule["alert"].(string)] = rule
				}
			}
			rule := alerts["ConcordPermissionShadowDisagreement"]
			expr, _, _ := unstructured.NestedString(rule, "expr")
			desc, _, _ := unstructured.NestedString(rule, "annotations", "description")
			if len(alerts) < 15 || !strings.HasSuffix(expr, "(increase(concord_permissions_shadow_disagreements_total[10m]))) > 0") ||
				!strings.Contains(desc, "{{ $labels.pod }}") {
				t.Errorf("PrometheusRule does not carry the generated alerts (%d) with the shadow check's:\n%s", len(alerts), b)
			}
		case "ConfigMap":
			// A dashboard: labelled for the Grafana sidecar, valid JSON.
			if o.GetLabels()["grafana_dashboard"] != "1" {
				t.Errorf("ConfigMap %s has no grafana_dashboard label", o.GetName())
			}
			data, _, _ := unstructured.NestedStringMap(o.Object, "data")
			for k, v := range data {
				var d struct{ UID, Title string }
				if err := json.Unmarshal([]byte(v), &d); err != nil || d.UID == "" {
					t.Errorf("ConfigMap %s: %s is not a dashboard: %v", o.GetName(), k, err)
				}
			}
		case "ClusterRole":
			rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
			if len(rules) < 5 {
				t.Errorf("ClusterRole has %d rules; generated rules missing?", len(rules))
			}
		}
	}

	nr := kinds(render(t, filepath.Join("ci", "no-rbac-values.yaml")))
	if nr["ClusterRole"]+nr["ServiceAccount"]+nr["NetworkPolicy"] != 0 || nr["Deployment"] != 2 {
		t.Errorf("no-rbac: %v", nr)
	}
}

func TestClusterNeedsImage(t *testing.T) {
	ch, err := loader.Load(".")
	if err != nil {
		t.Fatal(err)
	}
	inst := action.NewInstall(&action.Configuration{})
	inst.DryRun, inst.ClientOnly, inst.ReleaseName, inst.Namespace = true, true, "c", "ns"
	inst.KubeVersion = &chartutil.KubeVersion{Version: "v1.37.2", Major: "1", Minor: "37"}
	_, err = inst.Run(ch, map[string]any{"cluster": map[string]any{"enabled": true, "spec": map[string]any{}}})
	if err == nil || !strings.Contains(err.Error(), "cluster.spec.image is required") {
		t.Fatalf("err = %v, want the required-image failure", err)
	}
}

// TestCRDsMatchConfig guards the chart's copy of the CRDs; the generated
// files' staleness is checked by operator/controller's TestGeneratedFilesAreCurrent.
func TestCRDsMatchConfig(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "config", "crd", "bases", "*.yaml"))
	if len(files) != 5 {
		t.Fatalf("config/crd/bases has %d CRDs", len(files))
	}
	for _, f := range files {
		want, _ := os.ReadFile(f)
		got, err := os.ReadFile(filepath.Join("crds", filepath.Base(f)))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("crds/%s differs from config/crd/bases: run hack/generate.sh", filepath.Base(f))
		}
	}
}
