package app

import (
	"net"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/adapters/registry"
)

func TestPodConfigValidate(t *testing.T) {
	guildNode := Config{Roles: []string{registry.RoleGuild}}
	gatewayNode := Config{Roles: []string{registry.RoleGateway}}
	for _, tc := range []struct {
		name string
		pod  PodConfig
		cfg  Config
		want string // "" = valid
	}{
		{"gateway settings on a gateway", PodConfig{GatewayPool: "bots", ClientClass: "bots", SessionsTarget: 50000}, gatewayNode, ""},
		{"gateway settings on a guild node", PodConfig{GatewayPool: "bots"}, guildNode, "gateway role"},
		{"dedicated guild node", PodConfig{DedicatedGuild: 42}, guildNode, ""},
		{"dedicated gateway", PodConfig{DedicatedGuild: 42}, gatewayNode, "guild role"},
		{"cluster on any node", PodConfig{Cluster: "prod"}, gatewayNode, ""},
	} {
		tc.cfg.Pod = tc.pod
		err := validatePod(tc.cfg)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: validate = %v, want %q", tc.name, err, tc.want)
		}
	}
}

// The registry labels carry the operator's settings, and a dedicated
// guild node carries registry.LabelDedicated, which keeps it off the ring.
func TestRegistryLabels(t *testing.T) {
	n := &Node{cfg: Config{
		Node:          "gw-1",
		Worker:        3,
		Process:       17,
		Roles:         []string{registry.RoleGateway},
		AdvertiseHost: "10.0.0.5",
		Pod:           PodConfig{Cluster: "prod", GatewayPool: "bots", ClientClass: "bots", SessionsTarget: 50000},
	}, httpL: fakeListener("0.0.0.0:8080"), adminL: fakeListener("0.0.0.0:9090")}
	l := n.registryLabels()
	want := map[string]string{
		labelSnowflake: "3/17", labelAdmin: "10.0.0.5:9090", labelCluster: "prod",
		labelGatewayPool: "bots", labelClientClass: "bots", labelSessionsTarget: "50000",
	}
	for k, v := range want {
		if l[k] != v {
			t.Errorf("label %s = %q, want %q", k, l[k], v)
		}
	}
	if _, ok := l[registry.LabelDedicated]; ok {
		t.Error("a gateway carries the dedicated label")
	}
	n.cfg.Pod = PodConfig{DedicatedGuild: 42}
	n.adminL = nil
	l = n.registryLabels()
	if l[registry.LabelDedicated] != "42" || l[labelAdmin] != "10.0.0.5:8080" {
		t.Errorf("dedicated node without an admin listener: labels %v", l)
	}
	if registry.OnRing(registry.Node{Labels: l}) {
		t.Error("a dedicated node is on the ring")
	}
}

func TestPodMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := Config{Node: "gw-1", Roles: []string{registry.RoleGateway},
		Pod: PodConfig{Cluster: "prod", GatewayPool: "bots", SessionsTarget: 50000}}
	if err := registerPodMetrics(reg, cfg); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]float64{}
	labels := map[string]string{}
	for _, mf := range mfs {
		m := mf.GetMetric()[0]
		values[mf.GetName()] = m.GetGauge().GetValue()
		if mf.GetName() == "concord_cluster_node_info" {
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
		}
	}
	if v := values["concord_gateway_sessions_target"]; v != 50000 {
		t.Fatalf("concord_gateway_sessions_target = %v, want 50000", v)
	}
	if v := values["concord_cluster_node_info"]; v != 1 {
		t.Fatalf("concord_cluster_node_info = %v, want 1", v)
	}
	if labels["cluster"] != "prod" || labels["node"] != "gw-1" || labels["gateway_pool"] != "bots" {
		t.Fatalf("concord_cluster_node_info labels = %v", labels)
	}
	// Without a target, no target series.
	reg = prometheus.NewRegistry()
	cfg.Pod.SessionsTarget = 0
	if err := registerPodMetrics(reg, cfg); err != nil {
		t.Fatal(err)
	}
	mfs, _ = reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "concord_gateway_sessions_target" {
			t.Fatal("concord_gateway_sessions_target without a target")
		}
	}
}

// fakeListener is a listener that only has an address.
type fakeListener string

func (l fakeListener) Accept() (net.Conn, error) { return nil, net.ErrClosed }
func (l fakeListener) Close() error              { return nil }
func (l fakeListener) Addr() net.Addr {
	a, _ := net.ResolveTCPAddr("tcp", string(l))
	return a
}
