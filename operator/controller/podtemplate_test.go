package controller

import (
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
)

func testCluster() *concordv1.ConcordCluster {
	return &concordv1.ConcordCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "prod"},
		Spec: concordv1.ConcordClusterSpec{
			Image:   "concord:test",
			Storage: concordv1.StorageSpec{ContactPoints: []string{"scylla:9042"}},
			Kafka:   concordv1.KafkaSpec{Brokers: []string{"kafka:9092"}},
			Redis:   concordv1.RedisSpec{Address: "redis:6379"},
			Etcd:    concordv1.EtcdSpec{Endpoints: []string{"http://etcd:2379"}, Prefix: "/concord/"},
		},
	}
}

func specEnv(spec corev1.PodSpec, name string) (string, bool) {
	for _, e := range spec.Containers[0].Env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

func specPort(spec corev1.PodSpec, name string) (int32, bool) {
	for _, p := range spec.Containers[0].Ports {
		if p.Name == name {
			return p.ContainerPort, true
		}
	}
	return 0, false
}

// Every runtime pod serves its admin endpoint on the "admin" port that
// CONCORD_ADMIN names, reads only the settings `concord serve` accepts for
// its role, and leaves the snowflake pair to the registry.
func TestRuntimePodSpecAdminAndEnv(t *testing.T) {
	c := testCluster()
	for _, role := range []string{concordv1.RoleAPI, concordv1.RoleGuild, concordv1.RoleData, concordv1.RoleGateway} {
		spec := runtimePodSpec(c, "", []string{role}, nil, concordv1.PodPlacement{})
		if v, _ := specEnv(spec, "CONCORD_ADMIN"); v != "0.0.0.0:9090" {
			t.Errorf("%s: CONCORD_ADMIN = %q, want 0.0.0.0:9090", role, v)
		}
		if p, ok := specPort(spec, "admin"); !ok || p != PortAdmin {
			t.Errorf("%s: container port admin = %d, %v; want %d", role, p, ok, PortAdmin)
		}
		if v, _ := specEnv(spec, "CONCORD_CLUSTER"); v != "prod" {
			t.Errorf("%s: CONCORD_CLUSTER = %q", role, v)
		}
		for _, unset := range []string{"CONCORD_WORKER", "CONCORD_PROCESS", "CONCORD_SNOWFLAKE_ID"} {
			if _, ok := specEnv(spec, unset); ok {
				t.Errorf("%s: %s is set; every pod must claim its own pair", role, unset)
			}
		}
		_, redis := specEnv(spec, "CONCORD_REDIS")
		if want := role == concordv1.RoleGateway || role == concordv1.RoleAPI; redis != want {
			t.Errorf("%s: CONCORD_REDIS set = %v, want %v (serve refuses --redis on other roles)", role, redis, want)
		}
		if v, _ := specEnv(spec, "CONCORD_REGISTRY"); v != "etcd://etcd:2379" {
			t.Errorf("%s: CONCORD_REGISTRY = %q", role, v)
		}
	}
	if got := storeURL(c); got != "cassandra://scylla:9042/concord" {
		t.Errorf("storeURL with defaults = %q", got)
	}
	c.Spec.Storage.LocalDatacenter, c.Spec.Storage.Consistency = "dc1", "QUORUM"
	if got := storeURL(c); got != "cassandra://scylla:9042/concord?consistency=QUORUM&dc=dc1" {
		t.Errorf("storeURL with dc and consistency = %q", got)
	}
	c.Spec.Etcd.Prefix = "/tenants/a/"
	if got := registryURL(c); got != "etcd://etcd:2379/tenants/a/" {
		t.Errorf("registryURL with a prefix = %q", got)
	}
}

func TestGatewayPodSpecAdminPort(t *testing.T) {
	c := testCluster()
	for _, tc := range []struct {
		name        string
		port, admin int32
		wantAdmin   int32 // 0: no admin port, /admin on the WebSocket listener
	}{
		{"default", 0, 0, PortAdmin},
		{"custom admin port", 8443, 9443, 9443},
		{"admin on the WebSocket port", 8080, 8080, 0},
		{"WebSocket on the default admin port", PortAdmin, 0, 0},
	} {
		pool := &concordv1.GatewayPool{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "bots"},
			Spec:       concordv1.GatewayPoolSpec{ClusterRef: concordv1.ClusterReference{Name: "prod"}, Port: tc.port, AdminPort: tc.admin},
		}
		spec := gatewayPodSpec(c, pool)
		p, ok := specPort(spec, "admin")
		env, envOK := specEnv(spec, "CONCORD_ADMIN")
		if tc.wantAdmin == 0 {
			if ok || envOK {
				t.Errorf("%s: admin port %d (%v), CONCORD_ADMIN %q (%v); want neither", tc.name, p, ok, env, envOK)
			}
			continue
		}
		if !ok || p != tc.wantAdmin || env != "0.0.0.0:"+strconv.Itoa(int(tc.wantAdmin)) {
			t.Errorf("%s: admin port %d (%v), CONCORD_ADMIN %q; want %d", tc.name, p, ok, env, tc.wantAdmin)
		}
		if v, _ := specEnv(spec, "CONCORD_GATEWAY_POOL"); v != "bots" {
			t.Errorf("%s: CONCORD_GATEWAY_POOL = %q", tc.name, v)
		}
	}
}

// A pool's trustedProxies reach its pods as --trusted-proxies' variable;
// a pool without them sets none, so its pods trust nobody.
func TestGatewayPodSpecTrustedProxies(t *testing.T) {
	c := testCluster()
	pool := &concordv1.GatewayPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "users"},
		Spec:       concordv1.GatewayPoolSpec{ClusterRef: concordv1.ClusterReference{Name: "prod"}},
	}
	if v, ok := specEnv(gatewayPodSpec(c, pool), "CONCORD_TRUSTED_PROXIES"); ok {
		t.Errorf("a pool without trustedProxies sets CONCORD_TRUSTED_PROXIES=%q", v)
	}
	pool.Spec.TrustedProxies = []string{"10.0.0.0/8", "192.0.2.7"}
	if v, _ := specEnv(gatewayPodSpec(c, pool), "CONCORD_TRUSTED_PROXIES"); v != "10.0.0.0/8,192.0.2.7" {
		t.Errorf("CONCORD_TRUSTED_PROXIES = %q, want the pool's list", v)
	}
}

// TestKafkaSecurityEnv: a SASL secret brings the SCRAM mechanism with the
// credentials, and spec.kafka.tls turns TLS on, in the variables concord
// serve reads (--kafka-sasl-mechanism, --kafka-tls).
func TestKafkaSecurityEnv(t *testing.T) {
	c := testCluster()
	spec := runtimePodSpec(c, "", []string{concordv1.RoleGuild}, nil, concordv1.PodPlacement{})
	for _, name := range []string{"CONCORD_KAFKA_SASL_MECHANISM", "CONCORD_KAFKA_TLS", "CONCORD_KAFKA_USERNAME"} {
		if _, ok := specEnv(spec, name); ok {
			t.Errorf("%s set without spec.kafka.saslSecret/tls", name)
		}
	}
	c.Spec.Kafka.SASLSecret = &corev1.LocalObjectReference{Name: "kafka-user"}
	c.Spec.Kafka.TLS = true
	spec = runtimePodSpec(c, "", []string{concordv1.RoleGuild}, nil, concordv1.PodPlacement{})
	if v, _ := specEnv(spec, "CONCORD_KAFKA_SASL_MECHANISM"); v != "SCRAM-SHA-512" {
		t.Errorf("CONCORD_KAFKA_SASL_MECHANISM = %q, want SCRAM-SHA-512", v)
	}
	if v, _ := specEnv(spec, "CONCORD_KAFKA_TLS"); v != "true" {
		t.Errorf("CONCORD_KAFKA_TLS = %q, want true", v)
	}
	var user *corev1.EnvVar
	for i, e := range spec.Containers[0].Env {
		if e.Name == "CONCORD_KAFKA_USERNAME" {
			user = &spec.Containers[0].Env[i]
		}
	}
	if user == nil || user.ValueFrom == nil || user.ValueFrom.SecretKeyRef == nil || user.ValueFrom.SecretKeyRef.Name != "kafka-user" {
		t.Errorf("CONCORD_KAFKA_USERNAME = %+v, want from secret kafka-user", user)
	}
}

// Every pod the operator makes has a startup probe on its liveness
// endpoint (an SFU's on its admin port), so liveness does not kill a
// process still waiting for the schema migration lock; and topology
// spread over zones and nodes for its role.
func TestPodSpecsStartAndSpread(t *testing.T) {
	c := testCluster()
	pool := &concordv1.GatewayPool{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "users"}}
	vr := &concordv1.VoiceRegion{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "eu"}, Spec: concordv1.VoiceRegionSpec{Region: "eu"}}
	specs := map[string]corev1.PodSpec{
		"api":     runtimePodSpec(c, "", []string{concordv1.RoleAPI}, nil, concordv1.PodPlacement{}),
		"gateway": gatewayPodSpec(c, pool),
		"voice":   sfuPod(c, vr, "eu-sfu-x", "", "", -1).Spec,
	}
	for name, spec := range specs {
		ct := spec.Containers[0]
		if ct.StartupProbe == nil || ct.StartupProbe.HTTPGet == nil {
			t.Errorf("%s: no startup probe", name)
			continue
		}
		if st, lv := ct.StartupProbe.HTTPGet, ct.LivenessProbe.HTTPGet; st.Path != lv.Path || st.Port != lv.Port {
			t.Errorf("%s: startup probe %+v, liveness %+v: want the same endpoint", name, ct.StartupProbe.HTTPGet, ct.LivenessProbe.HTTPGet)
		}
		if got := ct.StartupProbe.PeriodSeconds * ct.StartupProbe.FailureThreshold; got < 300 {
			t.Errorf("%s: startup allowed %d s, want minutes", name, got)
		}
		keys := map[string]bool{}
		for _, tsc := range spec.TopologySpreadConstraints {
			keys[tsc.TopologyKey] = tsc.WhenUnsatisfiable == corev1.ScheduleAnyway && tsc.LabelSelector.MatchLabels[concordv1.LabelRole] != ""
		}
		if !keys[corev1.LabelTopologyZone] || !keys[corev1.LabelHostname] {
			t.Errorf("%s: topology spread %+v, want zone and hostname, ScheduleAnyway, by role", name, spec.TopologySpreadConstraints)
		}
	}
}
