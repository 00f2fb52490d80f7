package app

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/base/adminapi"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/config"
)

// PodConfig is what the operator tells a node about its place in the
// fleet (runtime/config).
type PodConfig = config.Pod

// Registry labels a node publishes.
const (
	labelSnowflake      = "concord.dev/snowflake"
	labelAdmin          = adminapi.LabelAdmin
	labelCluster        = "concord.dev/cluster"
	labelGatewayPool    = "concord.dev/gateway-pool"
	labelClientClass    = "concord.dev/client-class"
	labelSessionsTarget = "concord.dev/sessions-target"
)

// validate checks the settings against the node's roles.
func validatePod(c Config) error {
	p := c.Pod
	gw := p.GatewayPool != "" || p.ClientClass != "" || p.SessionsTarget != 0
	if gw && !has(c, registry.RoleGateway) {
		return errors.New("--gateway-pool, --gateway-client-class and --gateway-sessions-target are for nodes running the gateway role")
	}
	if p.DedicatedGuild != 0 && !has(c, registry.RoleGuild) {
		return errors.New("--guild-dedicated is for nodes running the guild role")
	}
	return nil
}

// registryLabels are the labels of the node's registry entry: its
// snowflake pair (checkUnique), its admin address (api nodes ask guild
// nodes for /admin/guilds there) and the operator's settings.
func (n *Node) registryLabels() map[string]string {
	admin := n.AdminAddr()
	if admin == "" {
		admin = n.HTTPAddr()
	}
	l := map[string]string{
		labelSnowflake: snowflakeLabel(n.cfg.Worker, n.cfg.Process),
		labelAdmin:     n.advertise(admin),
	}
	p := n.cfg.Pod
	set := func(k, v string) {
		if v != "" {
			l[k] = v
		}
	}
	set(labelCluster, p.Cluster)
	set(labelGatewayPool, p.GatewayPool)
	set(labelClientClass, p.ClientClass)
	if p.SessionsTarget > 0 {
		l[labelSessionsTarget] = strconv.Itoa(p.SessionsTarget)
	}
	if p.DedicatedGuild != 0 {
		l[registry.LabelDedicated] = strconv.FormatUint(uint64(p.DedicatedGuild), 10)
	}
	return l
}

// registerPodMetrics registers concord_cluster_node_info and, on a
// gateway node with a target, concord_gateway_sessions_target.
func registerPodMetrics(reg prometheus.Registerer, c Config) error {
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "concord_cluster_node_info",
		Help: "Always 1; labels name the node's cluster (CONCORD_CLUSTER), roles, gateway pool and dedicated guild.",
		ConstLabels: prometheus.Labels{
			"cluster":         c.Pod.Cluster,
			"node":            c.Node,
			"roles":           strings.Join(c.Roles, ","),
			"gateway_pool":    c.Pod.GatewayPool,
			"client_class":    c.Pod.ClientClass,
			"dedicated_guild": dedicatedLabel(c.Pod.DedicatedGuild),
		},
	})
	info.Set(1)
	cs := []prometheus.Collector{info}
	if has(c, registry.RoleGateway) && c.Pod.SessionsTarget > 0 {
		target := prometheus.NewGauge(prometheus.GaugeOpts{
			Name:        "concord_gateway_sessions_target",
			Help:        "Sessions the gateway pool sizes this node for (CONCORD_GATEWAY_SESSIONS_TARGET); compare with concord_gateway_sessions.",
			ConstLabels: prometheus.Labels{"node": c.Node, "pool": c.Pod.GatewayPool},
		})
		target.Set(float64(c.Pod.SessionsTarget))
		cs = append(cs, target)
	}
	for _, col := range cs {
		if err := reg.Register(col); err != nil {
			return fmt.Errorf("register pod metrics: %w", err)
		}
	}
	return nil
}

func dedicatedLabel(id snowflake.ID) string {
	if id == 0 {
		return ""
	}
	return strconv.FormatUint(uint64(id), 10)
}

// advertise returns addr with the configured advertised host.
func (n *Node) advertise(addr string) string {
	if addr == "" || n.cfg.AdvertiseHost == "" {
		return addr
	}
	_, port, _ := net.SplitHostPort(addr)
	return net.JoinHostPort(n.cfg.AdvertiseHost, port)
}
