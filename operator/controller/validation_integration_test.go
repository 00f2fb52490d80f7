//go:build integration

package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
)

// TestSpecValidation: the CRDs' CEL rules (x-kubernetes-validations from
// the kubebuilder markers) refuse spec fields that would make pods that
// cannot start or connect, with a message naming the field; the valid
// forms of the same fields pass.
func TestSpecValidation(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	cluster := func(name string, mutate func(*concordv1.ConcordClusterSpec)) *concordv1.ConcordCluster {
		c := &concordv1.ConcordCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: concordv1.ConcordClusterSpec{
				Image:   "concord:test",
				Storage: concordv1.StorageSpec{ContactPoints: []string{"scylla:9042", "10.0.0.7"}},
				Kafka:   concordv1.KafkaSpec{Brokers: []string{"kafka:9092", "[fd00::1]:9092"}, TopicPrefix: "prod."},
				Redis:   concordv1.RedisSpec{Address: "redis:6379"},
				Etcd:    concordv1.EtcdSpec{Endpoints: []string{"http://etcd:2379", "etcd-1:2379"}, Prefix: "/prod/"},
			}}
		mutate(&c.Spec)
		return c
	}
	pool := func(name string, mutate func(*concordv1.GatewayPoolSpec)) *concordv1.GatewayPool {
		p := &concordv1.GatewayPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: concordv1.GatewayPoolSpec{ClusterRef: concordv1.ClusterReference{Name: "prod"}}}
		mutate(&p.Spec)
		return p
	}
	dur := func(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }
	for _, tc := range []struct {
		name string
		obj  client.Object
		want string // "" = valid
	}{
		{"valid cluster", cluster("ok", func(*concordv1.ConcordClusterSpec) {}), ""},
		{"trusted proxies", cluster("proxies", func(s *concordv1.ConcordClusterSpec) {
			s.TrustedProxies = []string{"10.0.0.0/8", "192.0.2.7", "fd00::/8"}
		}), ""},
		{"live classifier on a KServe server", cluster("classifier-url", func(s *concordv1.ConcordClusterSpec) {
			s.Live = &concordv1.LiveSpec{Classifier: "http://triton.ml:8000/toxicity"}
		}), ""},
		{"live gateway autoscaling", cluster("live-scale", func(s *concordv1.ConcordClusterSpec) {
			s.Live = &concordv1.LiveSpec{}
			s.Autoscaling = &concordv1.AutoscalingPolicy{LiveGateway: &concordv1.LiveGatewayAutoscaling{
				ViewersPerGateway: 50_000, MinReplicas: 3, MaxReplicas: 3, ScaleDownAfter: dur(0)}}
		}), ""},
		{"live gateway autoscaling without spec.live", cluster("live-scale-nolive", func(s *concordv1.ConcordClusterSpec) {
			s.Autoscaling = &concordv1.AutoscalingPolicy{LiveGateway: &concordv1.LiveGatewayAutoscaling{}}
		}), "autoscaling.liveGateway scales the live gateways: it needs spec.live"},
		{"live gateway autoscaling min above max", cluster("live-scale-minmax", func(s *concordv1.ConcordClusterSpec) {
			s.Live = &concordv1.LiveSpec{}
			s.Autoscaling = &concordv1.AutoscalingPolicy{LiveGateway: &concordv1.LiveGatewayAutoscaling{MinReplicas: 5, MaxReplicas: 4}}
		}), "liveGateway.minReplicas must not exceed maxReplicas"},
		{"live gateway autoscaling min above the default max", cluster("live-scale-min", func(s *concordv1.ConcordClusterSpec) {
			s.Live = &concordv1.LiveSpec{}
			s.Autoscaling = &concordv1.AutoscalingPolicy{LiveGateway: &concordv1.LiveGatewayAutoscaling{MinReplicas: 101}}
		}), "liveGateway.minReplicas must not exceed maxReplicas"},
		{"live classifier off", cluster("classifier-off", func(s *concordv1.ConcordClusterSpec) {
			s.Live = &concordv1.LiveSpec{Classifier: "off"}
		}), ""},
		{"live classifier unknown", cluster("classifier-bad", func(s *concordv1.ConcordClusterSpec) {
			s.Live = &concordv1.LiveSpec{Classifier: "triton:8000"}
		}), "classifier is linear, off or http(s)://host:port/MODEL"},
		{"trusted proxy not an address", cluster("proxy-name", func(s *concordv1.ConcordClusterSpec) {
			s.TrustedProxies = []string{"ingress-nginx"}
		}), "each trusted proxy is an IP address or a CIDR range"},
		{"broker with a scheme", cluster("broker-url", func(s *concordv1.ConcordClusterSpec) {
			s.Kafka.Brokers = []string{"kafka://kafka:9092"}
		}), "each broker is host:port"},
		{"broker without a port", cluster("broker-port", func(s *concordv1.ConcordClusterSpec) {
			s.Kafka.Brokers = []string{"kafka"}
		}), "each broker is host:port"},
		{"redis URL", cluster("redis-url", func(s *concordv1.ConcordClusterSpec) {
			s.Redis.Address = "redis://redis:6379"
		}), "address is host:port"},
		{"etcd endpoint without a port", cluster("etcd-port", func(s *concordv1.ConcordClusterSpec) {
			s.Etcd.Endpoints = []string{"http://etcd"}
		}), "each endpoint is [http(s)://]host:port"},
		{"contact point URL", cluster("cassandra-url", func(s *concordv1.ConcordClusterSpec) {
			s.Storage.ContactPoints = []string{"cassandra://scylla:9042"}
		}), "each contact point is host or host:port"},
		{"topic prefix with a slash", cluster("topics", func(s *concordv1.ConcordClusterSpec) {
			s.Kafka.TopicPrefix = "prod/"
		}), "topicPrefix"},
		{"zero event-age threshold", cluster("threshold", func(s *concordv1.ConcordClusterSpec) {
			s.AutoPlacement = &concordv1.AutoPlacementPolicy{Enabled: true, EventAgeThreshold: dur(0), ReleaseBelow: dur(-time.Millisecond)}
		}), "eventAgeThreshold must be positive"},
		{"valid pool", pool("users", func(s *concordv1.GatewayPoolSpec) {
			s.TrustedProxies = []string{"10.0.0.0/8"}
			s.Drain = concordv1.DrainPolicy{Timeout: dur(time.Minute), ReconnectJitter: dur(0)}
		}), ""},
		{"pool zero drain timeout", pool("zero-drain", func(s *concordv1.GatewayPoolSpec) {
			s.Drain.Timeout = dur(0)
		}), "drain.timeout must be positive"},
		{"pool port clash", pool("ports", func(s *concordv1.GatewayPoolSpec) {
			s.Port, s.AdminPort = 9090, 9090
		}), "port and adminPort must differ"},
		{"pool trusted proxy", pool("proxy", func(s *concordv1.GatewayPoolSpec) {
			s.TrustedProxies = []string{"10.0.0.0/33"}
		}), "each trusted proxy is an IP address or a CIDR range"},
		{"placement zero move timeout", &concordv1.GuildPlacement{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "zero-move"},
			Spec: concordv1.GuildPlacementSpec{ClusterRef: concordv1.ClusterReference{Name: "prod"}, GuildID: "175928847299117063", MoveTimeout: dur(0)}},
			"moveTimeout must be positive"},
		{"relay port", &concordv1.RelayTier{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "relay-port"},
			Spec: concordv1.RelayTierSpec{ClusterRef: concordv1.ClusterReference{Name: "prod"}, GuildID: "175928847299117063", Port: 70000}},
			"spec.port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := k8s.Create(ctx, tc.obj)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("a valid spec was refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted; want refused with %q", tc.want)
			}
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("refused with %v; want Invalid naming %q", err, tc.want)
			}
		})
	}
}
