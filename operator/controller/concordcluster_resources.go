package controller

import (
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
)

// clusterRoles lists the runtime roles a ConcordCluster runs, in order.
var clusterRoles = []string{
	concordv1.RoleAPI, concordv1.RoleGuild, concordv1.RoleData,
	concordv1.RoleReadState, concordv1.RolePresence, concordv1.RoleRelay,
}

// liveRoles are the live-comment roles spec.live runs, in order.
var liveRoles = []string{
	concordv1.RoleLiveAPI, concordv1.RoleLiveGateway, concordv1.RoleLiveRouter, concordv1.RoleLiveArchiver,
	concordv1.RoleLiveRelay, concordv1.RoleLiveModeration,
}

// PortLiveRelay is the live-relay pods' relay-tree listener
// (--live-relay-listen, container port "relay"): routers and gateways
// reach it at the pod IP each node announces on the registry.
const PortLiveRelay = 7171

// activeRoles are the roles a cluster runs: every clusterRole, and the
// live roles when spec.live is set.
func activeRoles(c *concordv1.ConcordCluster) []string {
	if c.Spec.Live == nil {
		return clusterRoles
	}
	return append(slices.Clone(clusterRoles), liveRoles...)
}

// hasService reports whether a role gets a Service: the live consumers
// (router, archiver, moderation) serve nothing but their admin endpoint.
func hasService(role string) bool {
	switch role {
	case concordv1.RoleLiveRouter, concordv1.RoleLiveArchiver, concordv1.RoleLiveModeration:
		return false
	}
	return true
}

// liveRelayMode is --live-relay of the live routers and gateways: the
// relay tree when spec.live.relay runs pods, Redis pub/sub when it is
// scaled to none (a router publishing to a tree without nodes would
// reach nobody).
func liveRelayMode(c *concordv1.ConcordCluster) string {
	if _, n := roleSpec(c, concordv1.RoleLiveRelay); n > 0 {
		return "tree"
	}
	return "redis"
}

// roleSpec returns the spec of one role with its default replicas.
func roleSpec(c *concordv1.ConcordCluster, role string) (concordv1.RoleSpec, int32) {
	r := c.Spec.Roles
	var l concordv1.LiveSpec
	if c.Spec.Live != nil {
		l = *c.Spec.Live
	}
	switch role {
	case concordv1.RoleLiveAPI:
		return l.API, int32Or(l.API.Replicas, 2)
	case concordv1.RoleLiveGateway:
		return l.Gateway, int32Or(l.Gateway.Replicas, 2)
	case concordv1.RoleLiveRouter:
		return l.Router, int32Or(l.Router.Replicas, 2)
	case concordv1.RoleLiveArchiver:
		return l.Archiver, int32Or(l.Archiver.Replicas, 1)
	case concordv1.RoleLiveRelay:
		return l.Relay, int32Or(l.Relay.Replicas, 2)
	case concordv1.RoleLiveModeration:
		return l.Moderation, int32Or(l.Moderation.Replicas, 1)
	case concordv1.RoleAPI:
		return r.API, int32Or(r.API.Replicas, 2)
	case concordv1.RoleGuild:
		return r.Guild, int32Or(r.Guild.Replicas, 3)
	case concordv1.RoleData:
		return r.Data, int32Or(r.Data.Replicas, 2)
	case concordv1.RoleReadState:
		return r.ReadState, int32Or(r.ReadState.Replicas, 2)
	case concordv1.RolePresence:
		return r.Presence, int32Or(r.Presence.Replicas, 2)
	default:
		return r.Relay, int32Or(r.Relay.Replicas, 2)
	}
}

// workloadName is the Deployment/StatefulSet/Service/PDB name of a role.
func workloadName(c *concordv1.ConcordCluster, role string) string { return c.Name + "-" + role }

// runtimeConfig is the config file `concord serve` reads (--config).
type runtimeConfig struct {
	Cluster  string         `json:"cluster"`
	Storage  map[string]any `json:"storage"`
	EventLog map[string]any `json:"eventlog"`
	Counters map[string]any `json:"counters"`
	Registry map[string]any `json:"registry"`
}

// configData renders the cluster's connection settings (secrets stay in env).
func configData(c *concordv1.ConcordCluster) (map[string]string, error) {
	reg := map[string]any{"backend": "etcd", "endpoints": c.Spec.Etcd.Endpoints, "prefix": c.Spec.Etcd.Prefix}
	if c.Spec.Etcd.TLSSecret != nil {
		reg["tlsDir"] = "/etc/concord/etcd-tls"
	}
	cfg := runtimeConfig{
		Cluster: c.Name,
		Storage: map[string]any{
			"backend": "cassandra", "contactPoints": c.Spec.Storage.ContactPoints,
			"keyspace": c.Spec.Storage.Keyspace, "localDatacenter": c.Spec.Storage.LocalDatacenter,
			"consistency": c.Spec.Storage.Consistency,
		},
		EventLog: map[string]any{
			"backend": "kafka", "brokers": c.Spec.Kafka.Brokers,
			"topicPrefix": c.Spec.Kafka.TopicPrefix, "tls": c.Spec.Kafka.TLS,
		},
		Counters: map[string]any{"backend": "redis", "address": c.Spec.Redis.Address, "db": c.Spec.Redis.DB},
		Registry: reg,
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	return map[string]string{"config.yaml": string(b)}, nil
}

// proxiedRoles serve clients through the platform's ingress: the
// cluster's trustedProxies reach them.
var proxiedRoles = []string{concordv1.RoleAPI, concordv1.RoleLiveAPI, concordv1.RoleLiveGateway}

// mutateDeployment fills a role's Deployment.
func mutateDeployment(c *concordv1.ConcordCluster, role string, d *appsv1.Deployment) {
	spec, replicas := roleSpec(c, role)
	labels := withLabels(roleLabels(c, role), selectorLabels(c, role))
	d.Labels = withLabels(d.Labels, labels)
	d.Spec.Replicas = &replicas
	d.Spec.Selector = &metav1.LabelSelector{MatchLabels: selectorLabels(c, role)}
	d.Spec.Template.Labels = labels
	var extra []corev1.EnvVar
	if l := c.Spec.Live; l != nil && l.Prefix != "" && slices.Contains(liveRoles, role) {
		extra = append(extra, env("CONCORD_LIVE_PREFIX", l.Prefix))
	}
	if len(c.Spec.TrustedProxies) > 0 && slices.Contains(proxiedRoles, role) {
		extra = append(extra, env("CONCORD_TRUSTED_PROXIES", strings.Join(c.Spec.TrustedProxies, ",")))
	}
	extra = append(extra, liveRoleEnv(c, role)...)
	d.Spec.Template.Spec = runtimePodSpec(c, "", []string{role}, extra, spec.PodPlacement)
	if role == concordv1.RoleLiveRelay {
		ct := &d.Spec.Template.Spec.Containers[0]
		ct.Ports = append(ct.Ports, corev1.ContainerPort{Name: "relay", ContainerPort: PortLiveRelay, Protocol: corev1.ProtocolTCP})
	}
}

// liveRoleEnv is the settings of one live role beyond the prefix: the
// relay mode of routers and gateways, the relay listener of relay nodes
// (all interfaces; the node announces the pod IP, CONCORD_ADVERTISE_HOST)
// and the moderation role's classifier.
func liveRoleEnv(c *concordv1.ConcordCluster, role string) []corev1.EnvVar {
	switch role {
	case concordv1.RoleLiveGateway, concordv1.RoleLiveRouter:
		return []corev1.EnvVar{env("CONCORD_LIVE_RELAY", liveRelayMode(c))}
	case concordv1.RoleLiveRelay:
		return []corev1.EnvVar{env("CONCORD_LIVE_RELAY_LISTEN", fmt.Sprintf("0.0.0.0:%d", PortLiveRelay))}
	case concordv1.RoleLiveModeration:
		if cl := c.Spec.Live.Classifier; cl != "" {
			return []corev1.EnvVar{env("CONCORD_LIVE_CLASSIFIER", cl)}
		}
	}
	return nil
}

// mutateStatefulSet fills the guild role's StatefulSet: stable names give
// guild nodes stable registry ids on the ring.
func mutateStatefulSet(c *concordv1.ConcordCluster, role string, s *appsv1.StatefulSet) {
	spec, replicas := roleSpec(c, role)
	labels := withLabels(roleLabels(c, role), selectorLabels(c, role))
	s.Labels = withLabels(s.Labels, labels)
	s.Spec.Replicas = &replicas
	s.Spec.ServiceName = workloadName(c, role)
	s.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
	s.Spec.Selector = &metav1.LabelSelector{MatchLabels: selectorLabels(c, role)}
	s.Spec.Template.Labels = labels
	s.Spec.Template.Spec = runtimePodSpec(c, "", []string{role}, nil, spec.PodPlacement)
	s.Spec.Template.Spec.TerminationGracePeriodSeconds = ptrTo(int64(60)) // actors flush on SIGTERM
}

// selectorLabels are the immutable selector labels of a role's workload.
func selectorLabels(c *concordv1.ConcordCluster, role string) map[string]string {
	return map[string]string{concordv1.LabelCluster: c.Name, concordv1.LabelRole: role, concordv1.LabelOwner: c.Name}
}

// mutateService fills a role's Service: ClusterIP for the roles clients
// reach (api, live-api, live-gateway), headless for the roles addressed by
// pod (guild, data, readstate, presence, relay, live-relay).
func mutateService(c *concordv1.ConcordCluster, role string, s *corev1.Service) {
	s.Labels = withLabels(s.Labels, roleLabels(c, role))
	s.Spec.Selector = selectorLabels(c, role)
	if role == concordv1.RoleAPI || role == concordv1.RoleLiveAPI || role == concordv1.RoleLiveGateway {
		s.Spec.Ports = []corev1.ServicePort{
			{Name: "http", Port: PortHTTP, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP},
			// The admin listener (/admin/guilds) for kubectl-concord's
			// service proxy: an api node answers for every guild node.
			{Name: "admin", Port: PortAdmin, TargetPort: intstr.FromString("admin"), Protocol: corev1.ProtocolTCP},
		}
		return
	}
	if s.CreationTimestamp.IsZero() {
		s.Spec.ClusterIP = corev1.ClusterIPNone
	}
	s.Spec.PublishNotReadyAddresses = role == concordv1.RoleGuild
	if role == concordv1.RoleLiveRelay {
		// Routers and gateways find relay nodes on the registry, not
		// through this Service: it names the pods for DNS and scraping.
		s.Spec.Ports = []corev1.ServicePort{
			{Name: "relay", Port: PortLiveRelay, TargetPort: intstr.FromString("relay"), Protocol: corev1.ProtocolTCP},
			{Name: "http", Port: PortHTTP, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP},
			{Name: "admin", Port: PortAdmin, TargetPort: intstr.FromString("admin"), Protocol: corev1.ProtocolTCP},
		}
		return
	}
	s.Spec.Ports = []corev1.ServicePort{
		{Name: "grpc", Port: PortGRPC, TargetPort: intstr.FromString("grpc"), Protocol: corev1.ProtocolTCP},
		{Name: "http", Port: PortHTTP, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP},
		{Name: "admin", Port: PortAdmin, TargetPort: intstr.FromString("admin"), Protocol: corev1.ProtocolTCP},
	}
}

// mutatePDB fills a role's PodDisruptionBudget.
func mutatePDB(c *concordv1.ConcordCluster, role string, p *policyv1.PodDisruptionBudget) {
	spec, _ := roleSpec(c, role)
	mu := intstr.FromInt32(int32Or(spec.MaxUnavailable, 1))
	p.Labels = withLabels(p.Labels, roleLabels(c, role))
	p.Spec.MaxUnavailable = &mu
	p.Spec.Selector = &metav1.LabelSelector{MatchLabels: selectorLabels(c, role)}
}

func ptrTo[T any](v T) *T { return &v }
