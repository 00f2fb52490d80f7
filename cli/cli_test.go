package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes/scheme"
	restfake "k8s.io/client-go/rest/fake"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
	"github.com/concord-chat/concord/operator/fleet"
)

const ns = "chat"

// harness runs the plugin against a fake API (objects) and a fake service
// proxy (the admin endpoint), capturing output.
type harness struct {
	t      *testing.T
	client client.Client
	paths  []string
	guilds []fleet.GuildSample
	// snapshots, when set, replace guilds one by one at each admin call
	// (the figures a --watch refresh sees change).
	snapshots [][]fleet.GuildSample
	// ticks is how many refreshes --watch gets before its ticks end.
	ticks int
	// streams is what the live-api's admin endpoint answers; query is
	// the last request's query string.
	streams []LiveStream
	query   string
}

func newHarness(t *testing.T, objs ...client.Object) *harness {
	base := []client.Object{&concordv1.ConcordCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod"}}}
	c := fake.NewClientBuilder().WithScheme(Scheme).WithObjects(append(base, objs...)...).
		WithStatusSubresource(&concordv1.GuildPlacement{}, &concordv1.RelayTier{}, &concordv1.VoiceRegion{}, &concordv1.GatewayPool{}).Build()
	return &harness{t: t, client: c}
}

func (h *harness) admin() Admin {
	rc := &restfake.RESTClient{
		NegotiatedSerializer: scheme.Codecs.WithoutConversion(),
		GroupVersion:         corev1.SchemeGroupVersion,
		VersionedAPIPath:     "/api/v1",
		Client: restfake.CreateHTTPClient(func(req *http.Request) (*http.Response, error) {
			h.paths = append(h.paths, req.URL.Path)
			h.query = req.URL.RawQuery
			if len(h.snapshots) > 0 {
				h.guilds, h.snapshots = h.snapshots[0], h.snapshots[1:]
			}
			var body any = h.guilds
			if id, ok := strings.CutPrefix(req.URL.Path, "/api/v1/namespaces/chat/services/http:prod-api:admin/proxy/admin/guilds/"); ok {
				body = nil
				for _, g := range h.guilds {
					if g.GuildID == id {
						body = g
					}
				}
				if body == nil {
					return &http.Response{StatusCode: 404, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("{}"))}, nil
				}
			}
			if strings.Contains(req.URL.Path, "http:prod-live-api:admin/proxy/admin/live/streams") {
				body = h.streams
			}
			b, _ := json.Marshal(body)
			return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(bytes.NewReader(b))}, nil
		}),
	}
	return &ProxyAdmin{REST: rc}
}

func (h *harness) run(args ...string) (string, error) {
	var out, errOut bytes.Buffer
	env := &Env{
		IOStreams:   genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut},
		ConfigFlags: genericclioptions.NewConfigFlags(false),
		Output:      "table", Client: h.client, Admin: h.admin(), Namespace: ns,
		Now: func() time.Time { return time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC) },
		Ticks: func(time.Duration) (<-chan time.Time, func()) {
			c := make(chan time.Time, h.ticks)
			for range h.ticks {
				c <- time.Time{}
			}
			close(c)
			return c, func() {}
		},
	}
	cmd := newRoot(env)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func TestHelpDocumentsEveryCommand(t *testing.T) {
	h := newHarness(t)
	out, err := h.run("--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"guild", "gateway", "voice", "place", "-o, --output", "--concord-cluster"} {
		if !strings.Contains(out, want) {
			t.Errorf("--help lacks %q", want)
		}
	}
	for _, sub := range [][]string{{"guild", "get"}, {"guild", "top"}, {"gateway", "list"}, {"gateway", "drain"}, {"voice", "regions"}, {"voice", "servers"}, {"place"}} {
		out, err := h.run(append(sub, "--help")...)
		if err != nil || !strings.Contains(out, "Example") && !strings.Contains(out, "Examples") {
			t.Errorf("%v --help: %v\n%s", sub, err, out)
		}
	}
}

func TestGuildGet(t *testing.T) {
	h := newHarness(t,
		&concordv1.GuildPlacement{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "guild-42"},
			Spec:   concordv1.GuildPlacementSpec{ClusterRef: concordv1.ClusterReference{Name: "prod"}, GuildID: "42"},
			Status: concordv1.GuildPlacementStatus{Phase: concordv1.PlacementPlaced, PodName: "prod-guild-42", NodeName: "node-7"}},
		&concordv1.RelayTier{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "big"},
			Spec:   concordv1.RelayTierSpec{ClusterRef: concordv1.ClusterReference{Name: "prod"}, GuildID: "42"},
			Status: concordv1.RelayTierStatus{Guilds: []string{"42"}, DesiredRelays: 3, ReadyRelays: 2}},
	)
	h.guilds = []fleet.GuildSample{{GuildID: "42", Node: "prod-guild-42", Members: 250000, Online: 41000,
		EventAgeP50: 12 * time.Millisecond, EventAgeP99: 180 * time.Millisecond, QueueLength: 17, VoiceCalls: 4}}
	out, err := h.run("guild", "get", "42")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"dedicated (guild-42), Placed", "node-7", "250000", "41000", "2/3 (big)", "12ms", "180ms", "17", "VOICE CALLS"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if len(h.paths) != 1 || h.paths[0] != "/api/v1/namespaces/chat/services/http:prod-api:admin/proxy/admin/guilds/42" {
		t.Fatalf("admin calls = %v, want the service proxy of prod-api:admin", h.paths)
	}
	out, err = h.run("guild", "get", "42", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var info GuildInfo
	if err := json.Unmarshal([]byte(out), &info); err != nil || info.Online != 41000 || info.Phase != "Placed" || info.Relays != 3 {
		t.Fatalf("json = %+v, %v\n%s", info, err, out)
	}
	if _, err := h.run("guild", "get", "not-a-number"); err == nil || !strings.Contains(err.Error(), "snowflake") {
		t.Fatalf("invalid id: %v", err)
	}
	if _, err := h.run("guild", "get", "42", "-o", "xml"); err == nil {
		t.Fatal("want an error for -o xml")
	}
}

func TestGuildTop(t *testing.T) {
	h := newHarness(t)
	h.guilds = []fleet.GuildSample{
		{GuildID: "1", EventAgeP99: 10 * time.Millisecond, Online: 900},
		{GuildID: "2", EventAgeP99: 300 * time.Millisecond, Online: 50},
		{GuildID: "3", EventAgeP99: 90 * time.Millisecond, Online: 5000},
	}
	out, err := h.run("guild", "top", "--limit", "2")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "2 ") || !strings.HasPrefix(lines[2], "3 ") {
		t.Fatalf("by event age, limit 2:\n%s", out)
	}
	if strings.Contains(lines[0], "MEMBERS") {
		t.Fatalf("wide column in table output:\n%s", out)
	}
	out, _ = h.run("guild", "top", "--by", "online", "-o", "wide")
	lines = strings.Split(strings.TrimSpace(out), "\n")
	if !strings.HasPrefix(lines[1], "3 ") || !strings.Contains(lines[0], "MEMBERS") {
		t.Fatalf("by online, wide:\n%s", out)
	}
	if _, err := h.run("guild", "top", "--by", "size"); err == nil {
		t.Fatal("want an error for --by size")
	}
}

func gatewayPod(name, pool string, ann map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: ann,
		Labels: map[string]string{concordv1.LabelOwner: pool, concordv1.LabelRole: concordv1.RoleGateway, concordv1.LabelRevision: "r1"}},
		Status: corev1.PodStatus{PodIP: "10.0.0.9", Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
}

func TestGatewayListAndDrain(t *testing.T) {
	h := newHarness(t,
		&concordv1.GatewayPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "users"},
			Spec:   concordv1.GatewayPoolSpec{ClientClass: concordv1.ClientClassUsers},
			Status: concordv1.GatewayPoolStatus{CurrentRevision: "r1"}},
		gatewayPod("users-a", "users", nil),
		gatewayPod("users-b", "users", map[string]string{concordv1.AnnotationDraining: "2026-01-01T00:00:00Z", concordv1.AnnotationDrainSuccessor: "users-a"}),
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "api-0", Labels: map[string]string{concordv1.LabelRole: "api"}}},
	)
	out, err := h.run("gateway", "list", "-o", "wide")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "users-a") || !strings.Contains(out, "serving") ||
		!strings.Contains(out, "draining") || !strings.Contains(out, "10.0.0.9") {
		t.Fatalf("gateway list:\n%s", out)
	}
	out, err = h.run("gateway", "drain", "users-a")
	if err != nil || !strings.Contains(out, "drain requested") {
		t.Fatalf("drain: %v\n%s", err, out)
	}
	var p corev1.Pod
	_ = h.client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "users-a"}, &p)
	if _, ok := p.Annotations[concordv1.AnnotationDrainRequested]; !ok {
		t.Fatalf("pod not annotated: %v", p.Annotations)
	}
	if _, err := h.run("gateway", "drain", "api-0"); err == nil || !strings.Contains(err.Error(), "not a Concord gateway") {
		t.Fatalf("draining a non-gateway: %v", err)
	}
}

func TestVoiceRegions(t *testing.T) {
	h := newHarness(t, &concordv1.VoiceRegion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "eu"},
		Spec:   concordv1.VoiceRegionSpec{Region: "eu-west", Buffer: intstr.FromString("20%")},
		Status: concordv1.VoiceRegionStatus{Servers: 4, ReadyServers: 3, DrainingServers: 1, ActiveCalls: 120, CapacityUsed: "61%"}})
	out, err := h.run("voice", "regions", "-o", "yaml")
	if err != nil || !strings.Contains(out, "activeCalls: 120") || !strings.Contains(out, "capacityUsed: 61%") {
		t.Fatalf("voice regions yaml: %v\n%s", err, out)
	}
	out, _ = h.run("voice", "regions")
	if !strings.Contains(out, "eu-west") || !strings.Contains(out, "61%") || !strings.Contains(out, "OK") {
		t.Fatalf("voice regions:\n%s", out)
	}

	h = newHarness(t, &concordv1.VoiceRegion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dense"},
		Spec: concordv1.VoiceRegionSpec{Region: "eu-central", PortRange: &concordv1.VoicePortRange{Min: 40000, Max: 40299}}})
	if out, err := h.run("voice", "regions", "-o", "wide"); err != nil || !strings.Contains(out, "NodeExternalIP ports 40000-40299") {
		t.Fatalf("voice regions -o wide with a port range: %v\n%s", err, out)
	}

	h = newHarness(t, &concordv1.VoiceRegion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "turn"},
		Spec: concordv1.VoiceRegionSpec{Region: "eu-west", PublicAddress: concordv1.PublicAddressLoadBalancer,
			PublicHost: "$(CONCORD_VOICE_ID).voice.example.com",
			ICE: &concordv1.VoiceICE{Servers: []string{"turn:t:3478", "stun:t:3478"},
				SharedSecret: &concordv1.SecretKeyReference{Name: "coturn", Key: "auth"}}},
		Status: concordv1.VoiceRegionStatus{Conditions: []metav1.Condition{{Type: concordv1.ConditionDegraded,
			Status: metav1.ConditionTrue, Reason: "ICESecretNotFound", LastTransitionTime: metav1.Now()}}}})
	out, err = h.run("voice", "regions", "-o", "wide")
	if err != nil {
		t.Fatalf("voice regions -o wide: %v\n%s", err, out)
	}
	for _, want := range []string{"Degraded: ICESecretNotFound", "LoadBalancer ($(CONCORD_VOICE_ID).voice.example.com)", "2 servers, shared secret coturn"} {
		if !strings.Contains(out, want) {
			t.Errorf("voice regions -o wide lacks %q:\n%s", want, out)
		}
	}
}

func TestVoiceServers(t *testing.T) {
	h := newHarness(t,
		&concordv1.VoiceRegion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "eu"},
			Spec: concordv1.VoiceRegionSpec{Region: "eu-west", CapacityPerServer: 200},
			Status: concordv1.VoiceRegionStatus{ServerLoads: []concordv1.VoiceServerStatus{
				{Name: "eu-sfu-aaaaa", Endpoint: "203.0.113.7:8443", Ready: true, Reporting: true, Calls: 3, Participants: 50, PacketsForwarded: 2500,
					PacketLoss: "0.7%", Jitter: "2.1ms"},
				{Name: "eu-sfu-bbbbb", Ready: true, Draining: true, Reporting: true, Calls: 1, Participants: 2, Load: "9%"},
			}}},
		&concordv1.VoiceRegion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "us"},
			Spec:   concordv1.VoiceRegionSpec{Region: "us-east", CapacityPerServer: 100},
			Status: concordv1.VoiceRegionStatus{ServerLoads: []concordv1.VoiceServerStatus{{Name: "us-sfu-ccccc"}}}})
	out, err := h.run("voice", "servers", "-o", "wide")
	if err != nil {
		t.Fatalf("voice servers: %v\n%s", err, out)
	}
	for _, want := range []string{"eu-sfu-aaaaa", "eu-west", "Ready", "25%", "2500", "203.0.113.7:8443", "0.7%", "2.1ms", "eu-sfu-bbbbb", "Draining", "us-sfu-ccccc", "NotReady"} {
		if !strings.Contains(out, want) {
			t.Errorf("voice servers -o wide lacks %q:\n%s", want, out)
		}
	}
	out, err = h.run("voice", "servers", "eu-west", "-o", "json")
	if err != nil {
		t.Fatalf("voice servers eu-west: %v\n%s", err, out)
	}
	var rows []VoiceServerRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("json: %v\n%s", err, out)
	}
	if len(rows) != 2 || rows[0].Calls != 3 || rows[0].Load != "25%" || rows[1].State != "Draining" || rows[1].Load != "9%" {
		t.Fatalf("rows = %+v", rows)
	}
	if out, err := h.run("voice", "servers", "ap-south"); err == nil || !strings.Contains(err.Error()+out, "ap-south") {
		t.Fatalf("unknown region: err %v, out %s", err, out)
	}
}

func TestPlace(t *testing.T) {
	h := newHarness(t)
	out, err := h.run("place", "77", "--dedicated", "--node-selector", "pool=dedicated", "--toleration", "concord.dev/dedicated")
	if err != nil || !strings.Contains(out, "guildplacement/guild-77 created") {
		t.Fatalf("place: %v\n%s", err, out)
	}
	var gp concordv1.GuildPlacement
	if err := h.client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "guild-77"}, &gp); err != nil {
		t.Fatal(err)
	}
	if gp.Spec.GuildID != "77" || gp.Spec.ClusterRef.Name != "prod" || gp.Spec.NodeSelector["pool"] != "dedicated" ||
		len(gp.Spec.Tolerations) != 1 {
		t.Fatalf("placement = %+v", gp.Spec)
	}
	if _, err := h.run("place", "77", "--dedicated"); err == nil || !strings.Contains(err.Error(), "already placed") {
		t.Fatalf("second place: %v", err)
	}
	if _, err := h.run("place", "77"); err == nil || !strings.Contains(err.Error(), "--dedicated") {
		t.Fatalf("without --dedicated: %v", err)
	}
	if out, err := h.run("place", "77", "--release"); err != nil || !strings.Contains(out, "releasing") {
		t.Fatalf("release: %v %s", err, out)
	}
}
