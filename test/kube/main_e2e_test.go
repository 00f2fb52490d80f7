//go:build e2e

package kube

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/cli"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
)

const (
	// ns holds the suite's ConcordCluster and everything under it.
	ns = "concord-e2e"
	// operatorNS is where the chart installs the operator.
	operatorNS = "concord-system"
	// clusterName is the ConcordCluster's name.
	clusterName = "e2e"
	// poolName is the GatewayPool clients connect through.
	poolName = "users"
)

// node is what hack/node/up.sh wrote to its env.sh.
type node struct {
	kubeconfig, image, operatorImage string
	cassandra, redis, kafka, etcd    string
	// hostIP is the host's end of the node's veth, nodeIP the node's.
	hostIP, nodeIP string
}

var (
	nd     node
	k8s    client.Client
	kcs    *kubernetes.Clientset
	router string // host:port of the path router (the ingress)
	runID  string // keeps this run's keyspace, topics and registry apart
)

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	var missing []string
	get := func(name string) string {
		v := os.Getenv(name)
		if v == "" {
			missing = append(missing, name)
		}
		return v
	}
	nd = node{
		kubeconfig: get("KUBECONFIG"), image: get("CONCORD_NODE_IMAGE"), operatorImage: get("CONCORD_NODE_OPERATOR_IMAGE"),
		cassandra: get("CONCORD_NODE_CASSANDRA"), redis: get("CONCORD_NODE_REDIS"), kafka: get("CONCORD_NODE_KAFKA"), etcd: get("CONCORD_NODE_ETCD"),
		hostIP: get("CONCORD_NODE_HOST_IP"), nodeIP: get("CONCORD_NODE_IP"),
	}
	if len(missing) > 0 {
		return 0, fmt.Errorf("%s unset: the e2e suite needs the local node.\n"+
			"  make cluster-up && make test-e2e\n"+
			"or: . $(bash hack/node/up.sh) && go test -tags e2e ./test/kube/", strings.Join(missing, ", "))
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	runID = hex.EncodeToString(b)

	cfg, err := clientcmd.BuildConfigFromFlags("", nd.kubeconfig)
	if err != nil {
		return 0, fmt.Errorf("kubeconfig %s: %w", nd.kubeconfig, err)
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = concordv1.AddToScheme(scheme)
	if k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return 0, fmt.Errorf("client: %w", err)
	}
	if kcs, err = kubernetes.NewForConfig(cfg); err != nil {
		return 0, fmt.Errorf("clientset: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	if err := helmInstall(ctx); err != nil {
		return 0, err
	}
	if err := applyCluster(ctx); err != nil {
		return 0, err
	}
	stop, err := startRouter(ctx)
	if err != nil {
		return 0, err
	}
	defer stop()
	code := m.Run()
	if os.Getenv("CONCORD_E2E_KEEP") == "" {
		if err := cleanup(); err != nil {
			fmt.Fprintln(os.Stderr, "cleanup:", err)
		}
	}
	return code, nil
}

// helmInstall installs (or upgrades) charts/concord into operatorNS with
// the local operator image, and waits for the operator to be ready.
func helmInstall(ctx context.Context) error {
	settings := cli.New()
	settings.KubeConfig = nd.kubeconfig
	settings.SetNamespace(operatorNS)
	cfg := new(action.Configuration)
	if err := cfg.Init(settings.RESTClientGetter(), operatorNS, "secret", func(string, ...any) {}); err != nil {
		return fmt.Errorf("helm init: %w", err)
	}
	chart, err := loader.Load(filepath.Join("..", "..", "charts", "concord"))
	if err != nil {
		return fmt.Errorf("load chart: %w", err)
	}
	repo, tag, _ := strings.Cut(nd.operatorImage, ":")
	vals := map[string]any{
		"operator": map[string]any{
			"image":             map[string]any{"repository": repo, "tag": tag, "pullPolicy": "Never"},
			"autoscaleInterval": "5s",
			"logLevel":          "debug",
		},
	}
	if _, err := action.NewGet(cfg).Run("concord"); err == nil {
		// Helm installs crds/ on the first install only and never
		// upgrades them: the documented upgrade applies them first
		// (docs/operations.md), or new fields would be pruned.
		if err := applyCRDs(ctx, filepath.Join("..", "..", "charts", "concord", "crds")); err != nil {
			return err
		}
		up := action.NewUpgrade(cfg)
		up.Namespace, up.Wait, up.Timeout = operatorNS, true, 3*time.Minute
		if _, err := up.RunWithContext(ctx, "concord", chart, vals); err != nil {
			return fmt.Errorf("helm upgrade: %w", err)
		}
		return nil
	}
	in := action.NewInstall(cfg)
	in.ReleaseName, in.Namespace, in.CreateNamespace = "concord", operatorNS, true
	in.Wait, in.Timeout = true, 3*time.Minute
	if _, err := in.RunWithContext(ctx, chart, vals); err != nil {
		return fmt.Errorf("helm install: %w", err)
	}
	return nil
}

// applyCRDs server-side applies every CRD in dir, as
// `kubectl apply --server-side -f dir` does.
func applyCRDs(ctx context.Context, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("CRDs in %s: %v (%d files)", dir, err, len(files))
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var u unstructured.Unstructured
		if err := yaml.Unmarshal(raw, &u.Object); err != nil {
			return fmt.Errorf("decode %s: %w", f, err)
		}
		u.SetManagedFields(nil)
		if err := k8s.Apply(ctx, client.ApplyConfigurationFromUnstructured(&u), client.FieldOwner("concord-e2e"), client.ForceOwnership); err != nil {
			return fmt.Errorf("apply CRD %s: %w", u.GetName(), err)
		}
	}
	return nil
}

// sample reads config/samples/concord_v1alpha1_<kind>.yaml into obj.
func sample(kind string, obj any) error {
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", "concord_v1alpha1_"+kind+".yaml"))
	if err != nil {
		return fmt.Errorf("read sample %s: %w", kind, err)
	}
	if err := yaml.Unmarshal(raw, obj); err != nil {
		return fmt.Errorf("decode sample %s: %w", kind, err)
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

// one is the size of every role on this two-core node.
func one(r *concordv1.RoleSpec) {
	r.Replicas = ptr(int32(1))
	r.Resources = corev1.ResourceRequirements{}
	r.NodeSelector, r.Tolerations = nil, nil
}

// applyCluster creates the namespace, the server key and the suite's
// ConcordCluster, GatewayPool and VoiceRegion from the samples, and waits
// until each says Ready.
func applyCluster(ctx context.Context) error {
	// A namespace left by an earlier run (CONCORD_E2E_KEEP) goes first:
	// every run starts from the samples.
	if err := k8s.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}); err == nil {
		if err := cleanup(); err != nil {
			return err
		}
	}
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace: %w", err)
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "concord-server-key"},
		StringData: map[string]string{"key": hex.EncodeToString(key)}}
	if err := k8s.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create server key: %w", err)
	}

	var c concordv1.ConcordCluster
	if err := sample("concordcluster", &c); err != nil {
		return err
	}
	c.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: clusterName}
	c.Spec.Image, c.Spec.ImagePullPolicy = nd.image, corev1.PullNever
	for _, r := range []*concordv1.RoleSpec{&c.Spec.Roles.API, &c.Spec.Roles.Guild, &c.Spec.Roles.Data,
		&c.Spec.Roles.ReadState, &c.Spec.Roles.Presence, &c.Spec.Roles.Relay,
		&c.Spec.Live.API, &c.Spec.Live.Gateway, &c.Spec.Live.Router, &c.Spec.Live.Archiver,
		&c.Spec.Live.Relay, &c.Spec.Live.Moderation} {
		one(r)
	}
	// Two relay nodes, so a stream has an owner and a sibling to move to
	// (TestLiveModerationAndRelayFailover).
	c.Spec.Live.Relay.Replicas = ptr(int32(2))
	// The tests' servers, outside the cluster like managed services; the
	// test Cassandra has one node and no authentication.
	c.Spec.Storage = concordv1.StorageSpec{ContactPoints: []string{nd.cassandra}, Keyspace: "e2e_" + runID, Consistency: "ONE"}
	c.Spec.Kafka = concordv1.KafkaSpec{Brokers: []string{nd.kafka}, TopicPrefix: "e2e" + runID + "."}
	c.Spec.Redis = concordv1.RedisSpec{Address: nd.redis}
	c.Spec.Etcd = concordv1.EtcdSpec{Endpoints: []string{nd.etcd}, Prefix: "/e2e-" + runID + "/"}
	// One node: no dedicated pool, and the autoscaler is the autoscaler
	// test's to turn on.
	c.Spec.AutoPlacement = nil
	c.Spec.Autoscaling = nil
	if err := k8s.Create(ctx, &c); err != nil {
		return fmt.Errorf("create ConcordCluster: %w", err)
	}

	var gw concordv1.GatewayPool
	if err := sample("gatewaypool", &gw); err != nil {
		return err
	}
	gw.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: poolName}
	gw.Spec.ClusterRef.Name = clusterName
	gw.Spec.Replicas = ptr(int32(2))
	gw.Spec.Resources = corev1.ResourceRequirements{}
	gw.Spec.Drain.ReconnectJitter = &metav1.Duration{Duration: time.Second}
	gw.Spec.Drain.Timeout = &metav1.Duration{Duration: time.Minute}
	if err := k8s.Create(ctx, &gw); err != nil {
		return fmt.Errorf("create GatewayPool: %w", err)
	}

	var vr concordv1.VoiceRegion
	if err := sample("voiceregion", &vr); err != nil {
		return err
	}
	vr.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: regionName}
	vr.Spec.ClusterRef.Name = clusterName
	// One node: two SFUs share its host ports through a port range (with
	// a free slot for a replacement), and the TLS the voice gateway needs
	// in front of it is the test's, on the host end of the node's veth
	// (voiceTLS).
	vr.Spec.MinServers, vr.Spec.MaxServers = 2, 2
	vr.Spec.PortRange = &concordv1.VoicePortRange{Min: voicePortMin, Max: voicePortMin + 3*voiceSlots - 1}
	vr.Spec.PublicHost = nd.hostIP
	vr.Spec.NodeSelector = nil
	if err := k8s.Create(ctx, &vr); err != nil {
		return fmt.Errorf("create VoiceRegion: %w", err)
	}

	for _, o := range []client.Object{&concordv1.ConcordCluster{}, &concordv1.GatewayPool{}, &concordv1.VoiceRegion{}} {
		name := map[string]string{"*v1alpha1.ConcordCluster": clusterName, "*v1alpha1.GatewayPool": poolName, "*v1alpha1.VoiceRegion": regionName}[fmt.Sprintf("%T", o)]
		if err := awaitCondition(ctx, o, name, concordv1.ConditionReady, 5*time.Minute); err != nil {
			return err
		}
	}
	return nil
}

// conditioned is a Concord resource with status conditions.
func conditions(o client.Object) []metav1.Condition {
	switch v := o.(type) {
	case *concordv1.ConcordCluster:
		return v.Status.Conditions
	case *concordv1.GatewayPool:
		return v.Status.Conditions
	case *concordv1.VoiceRegion:
		return v.Status.Conditions
	case *concordv1.RelayTier:
		return v.Status.Conditions
	case *concordv1.GuildPlacement:
		return v.Status.Conditions
	}
	return nil
}

// awaitCondition polls the resource until condition typ is True for its
// current generation. Polling is the API's own way of observing: a watch
// would see the same updates.
func awaitCondition(ctx context.Context, o client.Object, name, typ string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, o)
		if err == nil {
			if c := meta.FindStatusCondition(conditions(o), typ); c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == o.GetGeneration() {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%T %s: condition %s not True within %v: conditions %+v, last error %v\n%s",
				o, name, typ, timeout, conditions(o), err, podReport(context.Background()))
		case <-time.After(time.Second):
		}
	}
}

// podReport lists the namespace's pods and the waiting reasons of those
// not ready, for failure messages.
func podReport(ctx context.Context) string {
	pods, err := kcs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "list pods: " + err.Error()
	}
	var b strings.Builder
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "  %s %s ready=%v", p.Name, p.Status.Phase, podReady(&p))
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil {
				fmt.Fprintf(&b, " waiting=%s(%s)", w.Reason, w.Message)
			}
			fmt.Fprintf(&b, " restarts=%d", cs.RestartCount)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// serviceAddr is ClusterIP:port of a Service's port named "http".
func serviceAddr(ctx context.Context, name string) (string, error) {
	svc, err := kcs.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("get Service %s: %w", name, err)
	}
	for _, p := range svc.Spec.Ports {
		if p.Name == "http" {
			return net.JoinHostPort(svc.Spec.ClusterIP, fmt.Sprint(p.Port)), nil
		}
	}
	return "", fmt.Errorf("Service %s has no http port", name)
}

// startRouter is the ingress: WebSocket upgrades to the GatewayPool's
// Service, the rest to the api Service. The Host header passes through, so the gateway
// URL the API hands out (/gateway/bot) and the resume URL point back here.
func startRouter(ctx context.Context) (func(), error) {
	api, err := serviceAddr(ctx, clusterName+"-api")
	if err != nil {
		return nil, err
	}
	gw, err := serviceAddr(ctx, poolName)
	if err != nil {
		return nil, err
	}
	proxy := func(addr string) *httputil.ReverseProxy {
		u := &url.URL{Scheme: "http", Host: addr}
		return &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.Out.Host = r.In.Host
		}}
	}
	toAPI, toGateway := proxy(api), proxy(gw)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("router: %w", err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// WebSocket upgrades are gateway sessions, whatever the path:
		// discord.py dials ws://host/, raw clients ws://host/gateway.
		if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			toGateway.ServeHTTP(w, r)
			return
		}
		toAPI.ServeHTTP(w, r)
	})}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(os.Stderr, "router:", err)
		}
	}()
	router = l.Addr().String()
	return func() { _ = srv.Close() }, nil
}

// cleanup deletes the namespace (the operator's finalizers release the
// registry state first) and waits until it is gone.
func cleanup() error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return fmt.Errorf("delete namespace: %w", err)
	}
	// Nothing is left to drain to: the pods need not wait out their grace
	// periods (a gateway's preStop holds it for the drain timeout).
	_ = kcs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(1))}, metav1.ListOptions{})
	for {
		err := k8s.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("namespace %s still there: %v", ns, err)
		case <-time.After(time.Second):
		}
	}
}
