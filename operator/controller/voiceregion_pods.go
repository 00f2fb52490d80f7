package controller

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
)

// Default ports of an SFU pod when the spec leaves them zero (the CRD
// defaults them; objects built in Go may not).
const (
	defaultMediaPort  = 50000
	defaultWebRTCPort = 50001
	defaultSignalPort = 8443
	defaultVoiceAdmin = 9090
	labelRegion       = "concord.dev/region"
)

// voicePorts are the ports of a region's SFU pods.
type voicePorts struct{ media, webrtc, signal, admin int32 }

func portsOf(vr *concordv1.VoiceRegion) voicePorts {
	p := voicePorts{media: vr.Spec.MediaPort, webrtc: vr.Spec.WebRTCPort, signal: vr.Spec.SignalPort, admin: vr.Spec.AdminPort}
	if p.media == 0 {
		p.media = defaultMediaPort
	}
	if p.signal == 0 {
		p.signal = defaultSignalPort
	}
	if p.admin == 0 {
		p.admin = defaultVoiceAdmin
	}
	return p
}

// annotationPortSlot is an SFU pod's slot k of spec.portRange: its ports
// are min+3k (signal), min+3k+1 (media) and min+3k+2 (WebRTC).
const annotationPortSlot = "voice.concord.dev/port-slot"

// slotPorts are the ports of slot k of vr's port range.
func slotPorts(vr *concordv1.VoiceRegion, k int) voicePorts {
	p := portsOf(vr)
	base := vr.Spec.PortRange.Min + int32(3*k)
	p.signal, p.media = base, base+1
	if p.webrtc > 0 {
		p.webrtc = base + 2
	}
	return p
}

// usedSlots are the port slots held by pods (deleting ones too: their
// ports are bound until they are gone).
func usedSlots(pods []corev1.Pod) map[int]bool {
	used := map[int]bool{}
	for _, p := range pods {
		if k, err := strconv.Atoi(p.Annotations[annotationPortSlot]); err == nil {
			used[k] = true
		}
	}
	return used
}

// freeSlot takes the lowest slot of vr's range not in used, or -1 when
// every slot is held.
func freeSlot(vr *concordv1.VoiceRegion, used map[int]bool) int {
	n := int(vr.Spec.PortRange.Max-vr.Spec.PortRange.Min+1) / 3
	for k := 0; k < n; k++ {
		if !used[k] {
			used[k] = true
			return k
		}
	}
	return -1
}

// newSFUName is a fresh SFU pod name; it is also the pod's voice server id
// and, with publicAddress LoadBalancer, its Service's name.
func newSFUName(vr *concordv1.VoiceRegion) string { return vr.Name + "-sfu-" + rand.String(5) }

// sfuPod is one SFU of the region: `concord serve --roles=voice` with its
// voice gateway on the signal port, RTP on the media port and WebRTC on the
// WebRTC port. publicIP is the address clients are told to use; empty, the
// node's IP (status.hostIP) is advertised, which is the pod's own address
// on the host network and the hostPorts' address otherwise.
//
// slot is the pod's slot of spec.portRange, or -1 without a range.
//
// node, when set, pins the pod to that node (publicAddress
// NodeExternalIP: publicIP is the node's ExternalIP; voiceregion_nodes.go).
func sfuPod(c *concordv1.ConcordCluster, vr *concordv1.VoiceRegion, name, publicIP, node string, slot int) *corev1.Pod {
	labels := withLabels(roleLabels(c, concordv1.RoleVoice), map[string]string{
		concordv1.LabelOwner: vr.Name, labelRegion: vr.Spec.Region,
		// A per-pod label the LoadBalancer Service selects on.
		concordv1.LabelPod: name,
	})
	ports := portsOf(vr)
	// Reconcile refuses a region whose ICE settings are wrong before any
	// pod is made, so they are valid here.
	ice, _ := iceOf(vr)
	annotations := map[string]string{annotationICEHash: ice.hash()}
	if slot >= 0 {
		ports = slotPorts(vr, slot)
		annotations[annotationPortSlot] = strconv.Itoa(slot)
	}
	if node != "" {
		annotations[annotationNode] = node
	}
	hostIP := corev1.EnvVar{Name: "CONCORD_HOST_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.hostIP"}}}
	public := publicIP
	if public == "" {
		// Dependent expansion: CONCORD_HOST_IP is defined before it.
		public = "$(CONCORD_HOST_IP)"
	}
	// The endpoint's host: the spec's name (its $(CONCORD_VOICE_ID)
	// expanded the same way), else the address.
	host := public
	if vr.Spec.PublicHost != "" {
		host = vr.Spec.PublicHost
	}
	webrtc := "off"
	if ports.webrtc > 0 {
		webrtc = "0.0.0.0:" + strconv.Itoa(int(ports.webrtc))
	}
	extra := []corev1.EnvVar{
		hostIP,
		env("CONCORD_VOICE_REGION", vr.Spec.Region),
		{Name: "CONCORD_VOICE_ID", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		env("CONCORD_VOICE_LISTEN", "0.0.0.0:"+strconv.Itoa(int(ports.signal))),
		env("CONCORD_VOICE_UDP", "0.0.0.0:"+strconv.Itoa(int(ports.media))),
		env("CONCORD_VOICE_WEBRTC_UDP", webrtc),
		env("CONCORD_VOICE_PUBLIC_HOST", host),
		env("CONCORD_VOICE_PUBLIC_IP", public),
		env("CONCORD_ADMIN", "0.0.0.0:"+strconv.Itoa(int(ports.admin))),
	}
	extra = append(extra, ice.env()...)
	spec := runtimePodSpec(c, "", []string{concordv1.RoleVoice}, extra, vr.Spec.PodPlacement)
	ct := &spec.Containers[0]
	hostPort := func(p int32) int32 {
		if vr.Spec.PublicAddress == concordv1.PublicAddressNodeExternalIP || vr.Spec.PublicAddress == "" {
			return p
		}
		return 0
	}
	ct.Ports = append(ct.Ports,
		corev1.ContainerPort{Name: "signal", ContainerPort: ports.signal, HostPort: hostPort(ports.signal), Protocol: corev1.ProtocolTCP},
		corev1.ContainerPort{Name: "media", ContainerPort: ports.media, HostPort: hostPort(ports.media), Protocol: corev1.ProtocolUDP},
		corev1.ContainerPort{Name: "admin", ContainerPort: ports.admin, Protocol: corev1.ProtocolTCP},
	)
	if ports.webrtc > 0 {
		ct.Ports = append(ct.Ports, corev1.ContainerPort{Name: "webrtc", ContainerPort: ports.webrtc, HostPort: hostPort(ports.webrtc), Protocol: corev1.ProtocolUDP})
	}
	// The admin listener serves the probes of a voice node; its HTTP
	// listener stays on the pod network's port.
	ct.ReadinessProbe.HTTPGet.Port = intstr.FromString("admin")
	ct.LivenessProbe.HTTPGet.Port = intstr.FromString("admin")
	ct.StartupProbe.HTTPGet.Port = intstr.FromString("admin")
	if vr.Spec.PublicAddress == concordv1.PublicAddressHostNetwork {
		spec.HostNetwork = true
		spec.DNSPolicy = corev1.DNSClusterFirstWithHostNet
	}
	if node != "" {
		pinToNode(&spec, node)
	}
	// Calls end on their own; SIGTERM only comes after a drain emptied the server.
	spec.TerminationGracePeriodSeconds = ptrTo(int64(30))
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: vr.Namespace, Name: name, Labels: labels, Annotations: annotations}, Spec: spec}
}

// sfuService is the LoadBalancer Service of one SFU (publicAddress
// LoadBalancer): the signal port and both UDP ports, traffic kept on the
// pod's node. It is created before its pod, which is created once the
// Service has an ingress address to advertise.
func sfuService(c *concordv1.ConcordCluster, vr *concordv1.VoiceRegion, name string) *corev1.Service {
	ports := portsOf(vr)
	sp := []corev1.ServicePort{
		{Name: "signal", Port: ports.signal, TargetPort: intstr.FromString("signal"), Protocol: corev1.ProtocolTCP},
		{Name: "media", Port: ports.media, TargetPort: intstr.FromString("media"), Protocol: corev1.ProtocolUDP},
	}
	if ports.webrtc > 0 {
		sp = append(sp, corev1.ServicePort{Name: "webrtc", Port: ports.webrtc, TargetPort: intstr.FromString("webrtc"), Protocol: corev1.ProtocolUDP})
	}
	labels := withLabels(roleLabels(c, concordv1.RoleVoice), map[string]string{
		concordv1.LabelOwner: vr.Name, labelRegion: vr.Spec.Region, concordv1.LabelPod: name,
	})
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: vr.Namespace, Name: name, Labels: labels},
		Spec: corev1.ServiceSpec{
			Type:                  corev1.ServiceTypeLoadBalancer,
			Selector:              map[string]string{concordv1.LabelPod: name, concordv1.LabelOwner: vr.Name},
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
			Ports:                 sp,
		},
	}
}

// ingressIP is the first IP of a LoadBalancer Service's ingress.
func ingressIP(s *corev1.Service) string {
	for _, in := range s.Status.LoadBalancer.Ingress {
		if in.IP != "" {
			return in.IP
		}
	}
	return ""
}

// addServer starts one more SFU: the pod at once, or with publicAddress
// LoadBalancer its Service, the pod following when the Service has an
// address (startPending). It reports whether a pod was created.
//
// used are the port slots taken (spec.portRange); the new pod's is added.
// With every slot taken no pod is made (the CRD keeps maxServers within
// the range, so only pods still terminating can hold them all).
//
// pods are the region's pods, for the choice of a NodeExternalIP SFU's
// node; the new pod is appended.
func (r *VoiceRegionReconciler) addServer(ctx context.Context, c *concordv1.ConcordCluster, vr *concordv1.VoiceRegion, used map[int]bool, pods *[]corev1.Pod) (*corev1.Pod, error) {
	name := newSFUName(vr)
	if vr.Spec.PublicAddress == concordv1.PublicAddressLoadBalancer {
		svc := sfuService(c, vr, name)
		if err := controllerutil.SetControllerReference(vr, svc, r.Scheme); err != nil {
			return nil, err
		}
		if err := r.Client.Create(ctx, svc); err != nil {
			return nil, fmt.Errorf("create LoadBalancer Service of SFU %s: %w", name, err)
		}
		return nil, nil
	}
	slot := -1
	if vr.Spec.PortRange != nil {
		if slot = freeSlot(vr, used); slot < 0 {
			logf.FromContext(ctx).Info("every port slot of the region is held; the next server waits for one", "region", vr.Spec.Region)
			return nil, nil
		}
	}
	var on nodeHosting
	if vr.Spec.PublicAddress == concordv1.PublicAddressNodeExternalIP || vr.Spec.PublicAddress == "" {
		h, external, err := r.chooseNode(ctx, vr, *pods)
		if err != nil {
			return nil, err
		}
		if external && h.node == "" {
			logf.FromContext(ctx).Info("no schedulable node with an ExternalIP can take another SFU of the region; the next server waits for one", "region", vr.Spec.Region)
			if slot >= 0 {
				delete(used, slot)
			}
			return nil, nil
		}
		on = h
	}
	p, err := r.createPod(ctx, c, vr, name, on.ip, on.node, slot)
	if err == nil {
		*pods = append(*pods, *p)
	}
	return p, err
}

func (r *VoiceRegionReconciler) createPod(ctx context.Context, c *concordv1.ConcordCluster, vr *concordv1.VoiceRegion, name, publicIP, node string, slot int) (*corev1.Pod, error) {
	p := sfuPod(c, vr, name, publicIP, node, slot)
	if err := controllerutil.SetControllerReference(vr, p, r.Scheme); err != nil {
		return nil, err
	}
	if err := r.Client.Create(ctx, p); err != nil {
		return nil, fmt.Errorf("create SFU pod: %w", err)
	}
	return p, nil
}

// pendingServices returns the region's SFU Services without a pod, and
// creates the pods of those that have an ingress address now.
func (r *VoiceRegionReconciler) pendingServices(ctx context.Context, c *concordv1.ConcordCluster, vr *concordv1.VoiceRegion, pods map[string]bool) (created []*corev1.Pod, pending []*corev1.Service, err error) {
	var list corev1.ServiceList
	if err := r.Client.List(ctx, &list, client.InNamespace(vr.Namespace),
		client.MatchingLabels{concordv1.LabelOwner: vr.Name, concordv1.LabelRole: concordv1.RoleVoice}); err != nil {
		return nil, nil, fmt.Errorf("list SFU Services: %w", err)
	}
	for i := range list.Items {
		s := &list.Items[i]
		if pods[s.Name] || !s.DeletionTimestamp.IsZero() {
			continue
		}
		ip := ingressIP(s)
		if ip == "" {
			pending = append(pending, s)
			continue
		}
		p, err := r.createPod(ctx, c, vr, s.Name, ip, "", -1)
		if apierrors.IsAlreadyExists(err) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		created = append(created, p)
	}
	return created, pending, nil
}
