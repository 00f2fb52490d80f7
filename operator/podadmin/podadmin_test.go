package podadmin

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
	"github.com/concord-chat/concord/operator/fleet"
	"github.com/concord-chat/concord/runtime/edge/adminauth"
)

// podFor returns a pod whose IP and admin port point at srv.
func podFor(t *testing.T, srv *httptest.Server, name string, labels map[string]string) *corev1.Pod {
	t.Helper()
	host, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "concord",
			Ports: []corev1.ContainerPort{{Name: "admin", ContainerPort: int32(p)}}}}},
		Status: corev1.PodStatus{PodIP: host},
	}
}

func TestDrainAndState(t *testing.T) {
	var got fleet.DrainRequest
	draining := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/admin/drain" {
			http.NotFound(w, r)
			return
		}
		if r.Method == http.MethodPost {
			if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			draining = true
		}
		_ = json.NewEncoder(w).Encode(fleet.DrainState{Draining: draining, Sessions: 3})
	}))
	defer srv.Close()
	c, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	pod := podFor(t, srv, "gw-1", nil)
	st, err := c.State(context.Background(), pod)
	if err != nil || st.Draining || st.Sessions != 3 {
		t.Fatalf("State = %+v, %v; want not draining, 3 sessions", st, err)
	}
	req := fleet.DrainRequest{Successor: "gw-2", SuccessorAddress: "10.0.0.2:9090", ReconnectJitter: 5 * time.Second}
	st, err = c.Drain(context.Background(), pod, req)
	if err != nil || !st.Draining {
		t.Fatalf("Drain = %+v, %v; want draining", st, err)
	}
	if got.Successor != "gw-2" || got.SuccessorAddress != "10.0.0.2:9090" || got.ReconnectJitter != 5*time.Second {
		t.Fatalf("server received %+v", got)
	}
}

func TestErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "not yet", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	c, _ := New(Config{})
	if _, err := c.State(context.Background(), podFor(t, srv, "gw", nil)); err == nil {
		t.Fatal("want an error for a 503")
	}
	if _, err := c.State(context.Background(), &corev1.Pod{}); err == nil {
		t.Fatal("want ErrNoAddress for a pod without IP")
	}
}

// clusterObjects are a ConcordCluster "prod" in "ns" whose server key
// secret holds key (none when key is nil).
func clusterObjects(key []byte) []client.Object {
	cl := &concordv1.ConcordCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "prod"}}
	if key == nil {
		return []client.Object{cl}
	}
	cl.Spec.ServerKeySecret = &concordv1.SecretKeyReference{Name: "prod-key", Key: "server-key"}
	return []client.Object{cl, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "prod-key"},
		Data: map[string][]byte{"server-key": key}}}
}

func newReader(objs ...client.Object) client.Reader {
	s := runtime.NewScheme()
	_ = corev1.AddToScheme(s)
	_ = concordv1.AddToScheme(s)
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
}

// The client derives the admin token from the pod's cluster's server key
// secret, as the nodes do from the key they are given: a node guarded by
// adminauth accepts its drain; a node with another key, or a cluster
// without a server key secret, refuses or is refused.
func TestAdminTokenFromServerKeySecret(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef-prod")
	drained := false
	srv := httptest.NewServer(adminauth.Guard(adminauth.Derive(key), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		drained = true
		_ = json.NewEncoder(w).Encode(fleet.DrainState{Draining: true})
	})))
	defer srv.Close()
	labels := map[string]string{concordv1.LabelCluster: "prod"}
	pod := podFor(t, srv, "prod-gw-0", labels)

	c, _ := New(Config{Reader: newReader(clusterObjects(key)...)})
	if st, err := c.Drain(context.Background(), pod, fleet.DrainRequest{}); err != nil || !st.Draining || !drained {
		t.Fatalf("Drain with the cluster's key = %+v, %v", st, err)
	}
	drained = false
	other, _ := New(Config{Reader: newReader(clusterObjects([]byte("another key, another cluster......"))...)})
	if _, err := other.Drain(context.Background(), pod, fleet.DrainRequest{}); err == nil || drained {
		t.Fatalf("Drain with another key: %v, drained %v; want 401", err, drained)
	}
	none, _ := New(Config{Reader: newReader(clusterObjects(nil)...)})
	if _, err := none.Drain(context.Background(), pod, fleet.DrainRequest{}); !errors.Is(err, ErrNoServerKey) || drained {
		t.Fatalf("Drain without a server key secret: %v, drained %v; want ErrNoServerKey", err, drained)
	}
}

func TestGuildStats(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef-prod")
	srv := httptest.NewServer(adminauth.Guard(adminauth.Derive(key), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode([]fleet.GuildSample{{GuildID: "42", EventAgeP99: 300 * time.Millisecond, Online: 20000}})
	})))
	defer srv.Close()
	labels := map[string]string{concordv1.LabelCluster: "prod", concordv1.LabelRole: concordv1.RoleGuild}
	r := newReader(append(clusterObjects(key), podFor(t, srv, "prod-guild-0", labels))...)
	c, _ := New(Config{Reader: r})
	got, err := c.GuildStats(context.Background(), fleet.ClusterKey{Namespace: "ns", Name: "prod"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].GuildID != "42" || got[0].Node != "prod-guild-0" || got[0].EventAgeP99 != 300*time.Millisecond {
		t.Fatalf("GuildStats = %+v", got)
	}
}

// TestNoContentDrain covers pods that accept a drain with 204 and serve
// /admin/drain on their "http" port (what `concord serve` does today).
func TestNoContentDrain(t *testing.T) {
	var posted bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/admin/drain" {
			posted = true
			w.WriteHeader(http.StatusNoContent)
			return
		}
		http.NotFound(w, r)
	}))
	defer srv.Close()
	pod := podFor(t, srv, "gw", nil)
	pod.Spec.Containers[0].Ports[0].Name = "http"
	c, _ := New(Config{})
	st, err := c.Drain(context.Background(), pod, fleet.DrainRequest{})
	if err != nil || !posted || !st.Draining || st.Sessions != -1 {
		t.Fatalf("Drain = %+v, %v (posted %v); want draining with unknown sessions", st, err, posted)
	}
	if _, err := c.State(context.Background(), pod); err == nil {
		t.Fatal("State of a pod without GET /admin/drain must fail, not report zero sessions")
	}
}
