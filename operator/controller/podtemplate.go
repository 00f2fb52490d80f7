package controller

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
)

// PortAdmin is the runtime's admin listener (CONCORD_ADMIN, container port
// "admin"): /admin/guilds, /admin/drain, /metrics and the probes, kept off
// the public listener. The api Service's "admin" port targets it.
const PortAdmin = 9090

// configMapName is the ConfigMap holding a cluster's connection settings.
func configMapName(c *concordv1.ConcordCluster) string { return c.Name + "-config" }

// roleLabels are the labels of every pod of one role of a cluster.
func roleLabels(c *concordv1.ConcordCluster, role string) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":       "concord",
		"app.kubernetes.io/instance":   c.Name,
		"app.kubernetes.io/component":  role,
		"app.kubernetes.io/managed-by": "concord-operator",
		concordv1.LabelCluster:         c.Name,
		concordv1.LabelRole:            role,
	}
}

// withLabels returns a copy of base with extra added.
func withLabels(base map[string]string, extra map[string]string) map[string]string {
	out := make(map[string]string, len(base)+len(extra))
	maps.Copy(out, base)
	maps.Copy(out, extra)
	return out
}

// runtimePodSpec is the pod spec of one `concord serve` process of a cluster.
// Settings reach the process through the environment fallbacks of its flags
// (--node → CONCORD_NODE, --http → CONCORD_HTTP, --admin → CONCORD_ADMIN,
// --cluster → CONCORD_CLUSTER, …), so the arguments carry only the subcommand
// and --roles. Every pod serves its admin endpoint on PortAdmin (container
// port "admin") unless extraEnv sets CONCORD_ADMIN itself. The snowflake
// worker/process pair is left unset, so each process claims a free one in
// the registry. CONCORD_REDIS goes only to gateway, api, live-api,
// live-gateway and live-router pods, the roles of `concord serve` that use
// Redis (identify admission, REST rate limits, live bans, fan-out and
// viewer counts; it is refused elsewhere). Secrets stay
// in secretKeyRef env vars; the cluster's ConfigMap is mounted at
// /etc/concord for reference. extraEnv is appended (role-specific
// settings).
func runtimePodSpec(c *concordv1.ConcordCluster, image string, roles []string, extraEnv []corev1.EnvVar, placement concordv1.PodPlacement) corev1.PodSpec {
	if image == "" {
		image = c.Spec.Image
	}
	field := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	env := []corev1.EnvVar{
		field("CONCORD_NODE", "metadata.name"),
		field("CONCORD_ADVERTISE_HOST", "status.podIP"),
		{Name: "CONCORD_CLUSTER", Value: c.Name},
		{Name: "CONCORD_HTTP", Value: fmt.Sprintf("0.0.0.0:%d", PortHTTP)},
		{Name: "CONCORD_GRPC", Value: fmt.Sprintf("0.0.0.0:%d", PortGRPC)},
		{Name: "CONCORD_REGISTRY", Value: registryURL(c)},
		{Name: "CONCORD_STORE", Value: storeURL(c)},
		{Name: "CONCORD_EVENTLOG", Value: eventLogURL(c)},
		{Name: "CONCORD_LOG_FORMAT", Value: "json"},
	}
	// An extraEnv CONCORD_ADMIN (the SFU's own admin port) takes the admin
	// listener over: its caller declares the "admin" container port.
	ownAdmin := slices.ContainsFunc(extraEnv, func(e corev1.EnvVar) bool { return e.Name == "CONCORD_ADMIN" })
	ports := []corev1.ContainerPort{
		{Name: "http", ContainerPort: PortHTTP, Protocol: corev1.ProtocolTCP},
		{Name: "grpc", ContainerPort: PortGRPC, Protocol: corev1.ProtocolTCP},
	}
	if !ownAdmin {
		env = append(env, corev1.EnvVar{Name: "CONCORD_ADMIN", Value: fmt.Sprintf("0.0.0.0:%d", PortAdmin)})
		ports = append(ports, corev1.ContainerPort{Name: "admin", ContainerPort: PortAdmin, Protocol: corev1.ProtocolTCP})
	}
	counters := slices.ContainsFunc(roles, func(r string) bool {
		switch r {
		case concordv1.RoleGateway, concordv1.RoleAPI, concordv1.RoleLiveAPI, concordv1.RoleLiveGateway, concordv1.RoleLiveRouter:
			return true
		}
		return false
	})
	if counters {
		env = append(env, corev1.EnvVar{Name: "CONCORD_REDIS", Value: "redis://" + c.Spec.Redis.Address})
	}
	secretEnv := func(name string, ref *concordv1.SecretKeyReference) {
		if ref == nil {
			return
		}
		env = append(env, corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: ref.Name}, Key: ref.Key},
		}})
	}
	secretEnv("CONCORD_SERVER_KEY", c.Spec.ServerKeySecret)
	secretEnv("CONCORD_CASSANDRA_USERNAME", c.Spec.Storage.UsernameSecret)
	secretEnv("CONCORD_CASSANDRA_PASSWORD", c.Spec.Storage.PasswordSecret)
	if counters {
		secretEnv("CONCORD_REDIS_PASSWORD", c.Spec.Redis.PasswordSecret)
	}
	if s := c.Spec.Kafka.SASLSecret; s != nil {
		secretEnv("CONCORD_KAFKA_USERNAME", &concordv1.SecretKeyReference{Name: s.Name, Key: "username"})
		secretEnv("CONCORD_KAFKA_PASSWORD", &concordv1.SecretKeyReference{Name: s.Name, Key: "password"})
		// The secret is documented as SASL/SCRAM credentials (SHA-512, as
		// Strimzi and MSK issue them); the runtime's default is PLAIN.
		env = append(env, corev1.EnvVar{Name: "CONCORD_KAFKA_SASL_MECHANISM", Value: "SCRAM-SHA-512"})
	}
	if c.Spec.Kafka.TLS {
		env = append(env, corev1.EnvVar{Name: "CONCORD_KAFKA_TLS", Value: "true"})
	}
	env = append(env, extraEnv...)
	volumes := []corev1.Volume{{
		Name: "config",
		VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: configMapName(c)},
		}},
	}}
	mounts := []corev1.VolumeMount{{Name: "config", MountPath: "/etc/concord", ReadOnly: true}}
	if s := c.Spec.Etcd.TLSSecret; s != nil {
		volumes = append(volumes, corev1.Volume{Name: "etcd-tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: s.Name}}})
		mounts = append(mounts, corev1.VolumeMount{Name: "etcd-tls", MountPath: "/etc/concord/etcd-tls", ReadOnly: true})
	}
	pull := c.Spec.ImagePullPolicy
	if pull == "" {
		pull = corev1.PullIfNotPresent
	}
	return corev1.PodSpec{
		ImagePullSecrets:          c.Spec.ImagePullSecrets,
		NodeSelector:              placement.NodeSelector,
		Tolerations:               placement.Tolerations,
		TopologySpreadConstraints: spreadConstraints(c, roles[0]),
		Volumes:                   volumes,
		Containers: []corev1.Container{{
			Name:            "concord",
			Image:           image,
			ImagePullPolicy: pull,
			Args:            []string{"serve", rolesArg(roles...)},
			Env:             env,
			Ports:           ports,
			Resources:       placement.Resources,
			VolumeMounts:    mounts,
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: "/readyz", Port: intstr.FromString("http"),
			}}, PeriodSeconds: 5},
			LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: "/healthz", Port: intstr.FromString("http"),
			}}, PeriodSeconds: 10, FailureThreshold: 6},
			// Startup can take minutes: the first process of a cluster
			// migrates the Cassandra schema and the others wait for its
			// lock, with their listeners not yet serving. Liveness starts
			// only once this passes, so a slow start is not killed as a
			// hang (seen on the real node: SFUs restarted mid-wait).
			StartupProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: "/healthz", Port: intstr.FromString("http"),
			}}, PeriodSeconds: 5, FailureThreshold: startupProbeFailures},
		}},
	}
}

// startupProbeFailures × 5 s is how long a pod may take to start serving
// /healthz before the kubelet restarts it: ten minutes.
const startupProbeFailures = 120

// spreadConstraints spread a role's pods over zones, then over nodes, so
// one zone or node going down takes as few of them as it can. They are
// preferences (ScheduleAnyway): a cluster with one zone or fewer nodes
// than replicas still schedules every pod; the scheduler only scores
// placements. A dedicated guild pod or an SFU pinned to a node is
// unaffected (one pod, or a required node affinity first).
func spreadConstraints(c *concordv1.ConcordCluster, role string) []corev1.TopologySpreadConstraint {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{concordv1.LabelCluster: c.Name, concordv1.LabelRole: role}}
	return []corev1.TopologySpreadConstraint{
		{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: sel},
		{MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: sel},
	}
}

// registryURL is --registry: etcd://host:port[,host:port] from the etcd
// endpoints, with the key prefix as its path when it is not the runtime's
// default /concord/.
func registryURL(c *concordv1.ConcordCluster) string {
	hosts := make([]string, 0, len(c.Spec.Etcd.Endpoints))
	for _, e := range c.Spec.Etcd.Endpoints {
		e = strings.TrimPrefix(strings.TrimPrefix(e, "http://"), "https://")
		hosts = append(hosts, e)
	}
	u := "etcd://" + strings.Join(hosts, ",")
	if p := strings.Trim(c.Spec.Etcd.Prefix, "/"); p != "" && p != "concord" {
		u += "/" + p + "/"
	}
	return u
}

// storeURL is --store: cassandra://host:port[,host:port]/keyspace, with
// ?dc= (the local datacenter) and ?consistency= when it is not the
// runtime's default LOCAL_QUORUM.
func storeURL(c *concordv1.ConcordCluster) string {
	ks := c.Spec.Storage.Keyspace
	if ks == "" {
		ks = "concord"
	}
	u := "cassandra://" + strings.Join(c.Spec.Storage.ContactPoints, ",") + "/" + ks
	q := url.Values{}
	if dc := c.Spec.Storage.LocalDatacenter; dc != "" {
		q.Set("dc", dc)
	}
	if cl := strings.ToUpper(c.Spec.Storage.Consistency); cl != "" && cl != "LOCAL_QUORUM" {
		q.Set("consistency", cl)
	}
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

// env is a plain environment variable.
func env(name, value string) corev1.EnvVar { return corev1.EnvVar{Name: name, Value: value} }

// rolesArg is the --roles flag of `concord serve`.
func rolesArg(roles ...string) string {
	s := "--roles="
	for i, r := range roles {
		if i > 0 {
			s += ","
		}
		s += r
	}
	return s
}

// adminAddress is host:port of a pod's admin endpoint: its container port
// named "admin", else "http".
func adminAddress(p *corev1.Pod) string {
	port := int32(PortHTTP)
	for _, ct := range p.Spec.Containers {
		for _, cp := range ct.Ports {
			if cp.Name == "admin" {
				return fmt.Sprintf("%s:%d", p.Status.PodIP, cp.ContainerPort)
			}
			if cp.Name == "http" {
				port = cp.ContainerPort
			}
		}
	}
	return fmt.Sprintf("%s:%d", p.Status.PodIP, port)
}

// eventLogURL is CONCORD_EVENTLOG: the brokers and, when set, the topic
// prefix that keeps this cluster's topics and consumer groups apart from
// other clusters on the same Kafka.
func eventLogURL(c *concordv1.ConcordCluster) string {
	u := "kafka://" + strings.Join(c.Spec.Kafka.Brokers, ",")
	if p := c.Spec.Kafka.TopicPrefix; p != "" {
		u += "?" + url.Values{"topic_prefix": {p}}.Encode()
	}
	return u
}
