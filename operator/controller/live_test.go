package controller

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
)

// The live relay and moderation roles run as `concord serve` does them in
// make run-cluster: relay nodes listen for the relay tree on all
// interfaces (announcing the pod IP) behind a "relay" container port,
// routers and gateways follow the tree while relay nodes run and fall
// back to Redis pub/sub when none does, and the moderation role gets the
// classifier the spec names. Neither needs Redis.
func TestLiveRelayAndModerationPods(t *testing.T) {
	c := testCluster()
	c.Spec.Live = &concordv1.LiveSpec{Classifier: "http://triton:8000/toxic"}
	deploy := func(role string) corev1.PodSpec {
		var d appsv1.Deployment
		mutateDeployment(c, role, &d)
		if got := d.Spec.Template.Spec.Containers[0].Args; len(got) != 2 || got[1] != "--roles="+role {
			t.Fatalf("%s: args %v", role, got)
		}
		return d.Spec.Template.Spec
	}

	relay := deploy(concordv1.RoleLiveRelay)
	if v, _ := specEnv(relay, "CONCORD_LIVE_RELAY_LISTEN"); v != "0.0.0.0:7171" {
		t.Errorf("live-relay: CONCORD_LIVE_RELAY_LISTEN = %q, want 0.0.0.0:7171", v)
	}
	if p, ok := specPort(relay, "relay"); !ok || p != PortLiveRelay {
		t.Errorf("live-relay: container port relay = %d, %v", p, ok)
	}
	if ct := relay.Containers[0]; ct.ReadinessProbe == nil || ct.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("live-relay: readiness probe %+v, want /readyz (ready once announced on the registry)", ct.ReadinessProbe)
	}
	mod := deploy(concordv1.RoleLiveModeration)
	if v, _ := specEnv(mod, "CONCORD_LIVE_CLASSIFIER"); v != "http://triton:8000/toxic" {
		t.Errorf("live-moderation: CONCORD_LIVE_CLASSIFIER = %q", v)
	}
	for role, spec := range map[string]corev1.PodSpec{"live-relay": relay, "live-moderation": mod} {
		if _, ok := specEnv(spec, "CONCORD_REDIS"); ok {
			t.Errorf("%s gets CONCORD_REDIS: the role does not use Redis", role)
		}
		if _, ok := specEnv(spec, "CONCORD_EVENTLOG"); !ok {
			t.Errorf("%s has no CONCORD_EVENTLOG", role)
		}
	}
	if hasService(concordv1.RoleLiveModeration) || !hasService(concordv1.RoleLiveRelay) {
		t.Errorf("hasService: live-moderation %v (want false), live-relay %v (want true)",
			hasService(concordv1.RoleLiveModeration), hasService(concordv1.RoleLiveRelay))
	}
	var svc corev1.Service
	mutateService(c, concordv1.RoleLiveRelay, &svc)
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || len(svc.Spec.Ports) == 0 || svc.Spec.Ports[0].Name != "relay" {
		t.Errorf("live-relay Service: clusterIP %q ports %+v, want headless with the relay port", svc.Spec.ClusterIP, svc.Spec.Ports)
	}

	for _, tc := range []struct {
		replicas *int32
		want     string
	}{{nil, "tree"}, {ptrTo(int32(3)), "tree"}, {ptrTo(int32(0)), "redis"}} {
		c.Spec.Live.Relay.Replicas = tc.replicas
		for _, role := range []string{concordv1.RoleLiveGateway, concordv1.RoleLiveRouter} {
			if v, _ := specEnv(deploy(role), "CONCORD_LIVE_RELAY"); v != tc.want {
				t.Errorf("relay replicas %v: %s CONCORD_LIVE_RELAY = %q, want %q", tc.replicas, role, v, tc.want)
			}
		}
	}
	// live-api needs no relay mode: it forwards viewers to a gateway.
	if _, ok := specEnv(deploy(concordv1.RoleLiveAPI), "CONCORD_LIVE_RELAY"); ok {
		t.Error("live-api gets CONCORD_LIVE_RELAY")
	}
	c.Spec.Live.Classifier = ""
	if _, ok := specEnv(deploy(concordv1.RoleLiveModeration), "CONCORD_LIVE_CLASSIFIER"); ok {
		t.Error("an empty classifier is passed on; the runtime's default (linear) should apply")
	}
}
