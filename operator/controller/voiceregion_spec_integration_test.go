//go:build integration

package controller

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
)

// specWait bounds the waits of these tests; a loaded machine is slow, never wrong.
const specWait = 60 * time.Second

// TestVoiceRegionICESpec: spec.ice reaches the SFU pods as the
// CONCORD_VOICE_ICE_* environment (servers and TTL as values, credentials
// only as required references to the named Secret keys), publicHost
// becomes the endpoint's host with the pod's name expanded, and a
// reference to a Secret that does not exist makes no pod and says so in
// the Degraded condition until the Secret appears.
func TestVoiceRegionICESpec(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	newCluster(t, ns, "prod")
	vr := &concordv1.VoiceRegion{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "turn"},
		Spec: concordv1.VoiceRegionSpec{
			ClusterRef: concordv1.ClusterReference{Name: "prod"}, Region: "eu-west", MinServers: 1, MaxServers: 2,
			PublicHost: "$(CONCORD_VOICE_ID).eu-west.voice.example.com",
			ICE: &concordv1.VoiceICE{
				Servers:       []string{"turn:turn.example:3478?transport=udp", "stun:turn.example:3478"},
				SharedSecret:  &concordv1.SecretKeyReference{Name: "coturn", Key: "static-auth-secret"},
				CredentialTTL: &metav1.Duration{Duration: 90 * time.Minute},
			},
		},
	}
	g.Expect(k8s.Create(ctx, vr)).To(Succeed())
	labels := map[string]string{concordv1.LabelOwner: "turn", concordv1.LabelRole: concordv1.RoleVoice}

	// The Secret does not exist yet: no pod, and the condition names it.
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(vr), vr)).To(Succeed())
		c := meta.FindStatusCondition(vr.Status.Conditions, concordv1.ConditionDegraded)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal("ICESecretNotFound"))
		g.Expect(c.Message).To(ContainSubstring("coturn"))
	}, specWait, poll).Should(Succeed())
	g.Expect(listPods(g, ns, labels)).To(BeEmpty())

	// A Secret without the key is no better.
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "coturn"}, Data: map[string][]byte{"other": []byte("x")}}
	g.Expect(k8s.Create(ctx, sec)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(vr), vr)).To(Succeed())
		c := meta.FindStatusCondition(vr.Status.Conditions, concordv1.ConditionDegraded)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal("ICESecretNotFound"))
		g.Expect(c.Message).To(ContainSubstring(`"static-auth-secret"`))
	}, specWait, poll).Should(Succeed())
	g.Expect(listPods(g, ns, labels)).To(BeEmpty())

	// With the key the region starts, no longer degraded.
	sec.Data = map[string][]byte{"static-auth-secret": []byte("shared-with-coturn")}
	g.Expect(k8s.Update(ctx, sec)).To(Succeed())
	g.Eventually(func(g Gomega) {
		pods := listPods(g, ns, labels)
		g.Expect(pods).To(HaveLen(1))
		spec := pods[0].Spec
		g.Expect(envValue(spec, "CONCORD_VOICE_ICE_SERVERS")).To(Equal("turn:turn.example:3478?transport=udp,stun:turn.example:3478"))
		ttl, err := time.ParseDuration(envValue(spec, "CONCORD_VOICE_ICE_CREDENTIAL_TTL"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ttl).To(Equal(90 * time.Minute))
		env := spec.Containers[0].Env
		i := slices.IndexFunc(env, func(e corev1.EnvVar) bool { return e.Name == "CONCORD_VOICE_ICE_SECRET" })
		g.Expect(i).To(BeNumerically(">=", 0))
		g.Expect(env[i].Value).To(BeEmpty(), "the shared secret is never in the pod spec")
		g.Expect(env[i].ValueFrom.SecretKeyRef).To(Equal(&corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "coturn"}, Key: "static-auth-secret"}))
		for _, name := range []string{"CONCORD_VOICE_ICE_USERNAME", "CONCORD_VOICE_ICE_CREDENTIAL"} {
			g.Expect(slices.IndexFunc(env, func(e corev1.EnvVar) bool { return e.Name == name })).To(Equal(-1), name)
		}
		// The endpoint names the pod; media keeps the node's address.
		g.Expect(envValue(spec, "CONCORD_VOICE_PUBLIC_HOST")).To(Equal("$(CONCORD_VOICE_ID).eu-west.voice.example.com"))
		g.Expect(envValue(spec, "CONCORD_VOICE_PUBLIC_IP")).To(Equal("$(CONCORD_HOST_IP)"))
		id := slices.IndexFunc(env, func(e corev1.EnvVar) bool { return e.Name == "CONCORD_VOICE_ID" })
		host := slices.IndexFunc(env, func(e corev1.EnvVar) bool { return e.Name == "CONCORD_VOICE_PUBLIC_HOST" })
		g.Expect(id).To(BeNumerically(">=", 0))
		g.Expect(id).To(BeNumerically("<", host), "dependent env expansion needs CONCORD_VOICE_ID first")
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(vr), vr)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(vr.Status.Conditions, concordv1.ConditionDegraded)).To(BeFalse())
	}, specWait, poll).Should(Succeed())
}

// TestVoiceRegionICESpecRejected: the CRD's schema refuses bad ICE input
// at the API server, each with a message saying what is wrong.
func TestVoiceRegionICESpecRejected(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	ref := func(k string) *concordv1.SecretKeyReference {
		return &concordv1.SecretKeyReference{Name: "coturn", Key: k}
	}
	for name, c := range map[string]struct {
		ice  concordv1.VoiceICE
		host string
		want string
	}{
		"turn without credentials": {ice: concordv1.VoiceICE{Servers: []string{"turn:t:3478"}}, want: "needs ice.sharedSecret"},
		"not a STUN/TURN URL":      {ice: concordv1.VoiceICE{Servers: []string{"http://t"}}, want: "spec.ice.servers[0]"},
		"username alone":           {ice: concordv1.VoiceICE{Servers: []string{"turn:t"}, Username: ref("u")}, want: "go together"},
		"ttl without a secret": {ice: concordv1.VoiceICE{Servers: []string{"turn:t"}, Username: ref("u"), Credential: ref("p"),
			CredentialTTL: &metav1.Duration{Duration: time.Hour}}, want: "credentialTTL applies"},
		"no servers":       {ice: concordv1.VoiceICE{}, want: "spec.ice.servers"},
		"bad public host":  {ice: concordv1.VoiceICE{Servers: []string{"stun:t"}}, host: "Voice_Host!", want: "spec.publicHost"},
		"empty secret key": {ice: concordv1.VoiceICE{Servers: []string{"turn:t"}, SharedSecret: &concordv1.SecretKeyReference{Name: "x"}}, want: "spec.ice.sharedSecret.key"},
	} {
		ice := c.ice
		vr := &concordv1.VoiceRegion{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "bad-"},
			Spec: concordv1.VoiceRegionSpec{ClusterRef: concordv1.ClusterReference{Name: "prod"}, Region: "eu-west",
				MaxServers: 1, PublicHost: c.host, ICE: &ice},
		}
		err := k8s.Create(ctx, vr)
		g.Expect(err).To(HaveOccurred(), name)
		g.Expect(err.Error()).To(ContainSubstring(c.want), name)
	}
}

// TestVoiceRegionPortRange: with spec.portRange every SFU pod gets its own
// slot of three host ports (signal, media, WebRTC), listens on them and
// advertises them, so several SFUs can share a node; a freed slot is
// reused. The schema refuses a range too small for maxServers and a
// range with a LoadBalancer.
func TestVoiceRegionPortRange(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	newCluster(t, ns, "prod")
	vr := &concordv1.VoiceRegion{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dense"},
		Spec: concordv1.VoiceRegionSpec{ClusterRef: concordv1.ClusterReference{Name: "prod"}, Region: "eu-west",
			MinServers: 3, MaxServers: 3, WebRTCPort: 50001,
			PortRange: &concordv1.VoicePortRange{Min: 40000, Max: 40008}},
	}
	g.Expect(k8s.Create(ctx, vr)).To(Succeed())
	labels := map[string]string{concordv1.LabelOwner: "dense", concordv1.LabelRole: concordv1.RoleVoice}
	want := func(k int) []corev1.ContainerPort {
		b := int32(40000 + 3*k)
		return []corev1.ContainerPort{
			{Name: "signal", ContainerPort: b, HostPort: b, Protocol: corev1.ProtocolTCP},
			{Name: "media", ContainerPort: b + 1, HostPort: b + 1, Protocol: corev1.ProtocolUDP},
			{Name: "webrtc", ContainerPort: b + 2, HostPort: b + 2, Protocol: corev1.ProtocolUDP},
		}
	}
	check := func(g Gomega, p corev1.Pod) int {
		k, err := strconv.Atoi(p.Annotations[annotationPortSlot])
		g.Expect(err).NotTo(HaveOccurred(), "pod %s has no port slot", p.Name)
		b := 40000 + 3*k
		g.Expect(p.Spec.Containers[0].Ports).To(ContainElements(want(k)))
		g.Expect(envValue(p.Spec, "CONCORD_VOICE_LISTEN")).To(Equal("0.0.0.0:" + strconv.Itoa(b)))
		g.Expect(envValue(p.Spec, "CONCORD_VOICE_UDP")).To(Equal("0.0.0.0:" + strconv.Itoa(b+1)))
		g.Expect(envValue(p.Spec, "CONCORD_VOICE_WEBRTC_UDP")).To(Equal("0.0.0.0:" + strconv.Itoa(b+2)))
		return k
	}
	var victim string
	g.Eventually(func(g Gomega) {
		pods := listPods(g, ns, labels)
		g.Expect(pods).To(HaveLen(3))
		slots := map[int]bool{}
		for _, p := range pods {
			k := check(g, p)
			slots[k] = true
			if k == 1 {
				victim = p.Name
			}
		}
		g.Expect(slots).To(Equal(map[int]bool{0: true, 1: true, 2: true}))
	}, specWait, poll).Should(Succeed())

	// The pod of slot 1 dies (never ready, no calls): its replacement takes slot 1.
	g.Expect(k8s.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: victim}},
		client.GracePeriodSeconds(0))).To(Succeed())
	g.Eventually(func(g Gomega) {
		pods := listPods(g, ns, labels)
		g.Expect(pods).To(HaveLen(3))
		slots := map[int]bool{}
		for _, p := range pods {
			g.Expect(p.Name).NotTo(Equal(victim))
			slots[check(g, p)] = true
		}
		g.Expect(slots).To(Equal(map[int]bool{0: true, 1: true, 2: true}))
	}, specWait, poll).Should(Succeed())

	for want, spec := range map[string]concordv1.VoiceRegionSpec{
		"three ports for each of maxServers": {MaxServers: 4, PortRange: &concordv1.VoicePortRange{Min: 40000, Max: 40008}},
		"portRange needs publicAddress NodeExternalIP": {MaxServers: 1, PublicAddress: concordv1.PublicAddressLoadBalancer,
			PortRange: &concordv1.VoicePortRange{Min: 40000, Max: 40008}},
		"portRange needs at least three ports": {MaxServers: 1, PortRange: &concordv1.VoicePortRange{Min: 40000, Max: 40001}},
	} {
		spec.ClusterRef, spec.Region = concordv1.ClusterReference{Name: "prod"}, "eu-west"
		err := k8s.Create(ctx, &concordv1.VoiceRegion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "bad-"}, Spec: spec})
		g.Expect(err).To(HaveOccurred(), want)
		g.Expect(err.Error()).To(ContainSubstring(want))
	}
}
