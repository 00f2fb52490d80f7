//go:build e2e

package kube

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/cli"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
)

// git runs git in the repository and returns its output.
func git(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return string(out)
}

// chartVersion is the version in a Chart.yaml.
func chartVersion(t *testing.T, raw []byte) string {
	t.Helper()
	var c struct{ Version string }
	if err := yaml.Unmarshal(raw, &c); err != nil || c.Version == "" {
		t.Fatalf("Chart.yaml: version %q (%v)", c.Version, err)
	}
	return c.Version
}

// previousChart finds the last commit whose charts/concord holds the chart
// version before this checkout's: the parent of the oldest commit carrying
// the current version (HEAD while the bump is not committed yet).
// CONCORD_E2E_PREVIOUS_REF names another.
func previousChart(t *testing.T) (ref, version, current string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "charts", "concord", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	current = chartVersion(t, raw)
	ref = os.Getenv("CONCORD_E2E_PREVIOUS_REF")
	if ref == "" {
		ref = "HEAD"
		for _, c := range strings.Fields(git(t, "log", "--format=%H", "--", "charts/concord/Chart.yaml")) {
			if chartVersion(t, []byte(git(t, "show", c+":charts/concord/Chart.yaml"))) != current {
				break
			}
			ref = c + "^"
		}
	}
	version = chartVersion(t, []byte(git(t, "show", ref+":charts/concord/Chart.yaml")))
	if version == current {
		t.Fatalf("no earlier chart version in git history than %s (ref %s): bump charts/concord/Chart.yaml's version with a chart change", current, ref)
	}
	return ref, version, current
}

// previousRelease extracts the tree at ref, builds its operator into an
// image and imports it into the node's containerd (as hack/node/images.sh
// does for this checkout's), and returns the chart directory and image.
func previousRelease(t *testing.T, ref string) (chartDir, image string) {
	t.Helper()
	dir := t.TempDir()
	archive := exec.Command("sh", "-c", fmt.Sprintf("git archive %s | tar -x -C %s", ref, dir))
	archive.Dir = filepath.Join("..", "..")
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("git archive %s: %v\n%s", ref, err, out)
	}
	bin := filepath.Join(dir, "concord-operator")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "./operator/cmd/concord-operator")
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the operator of %s: %v\n%s", ref, err, out)
	}
	sha := strings.TrimSpace(git(t, "rev-parse", "--short=12", ref))
	image = "concord.local/concord-operator:prev-" + sha
	tar := filepath.Join(dir, "operator.tar")
	pack := exec.Command("bash", filepath.Join("hack", "node", "image.sh"), tar, image, "/concord-operator", bin)
	pack.Dir = filepath.Join("..", "..")
	if out, err := pack.CombinedOutput(); err != nil {
		t.Fatalf("package %s: %v\n%s", image, err, out)
	}
	pid, err := os.ReadFile(filepath.Join(os.Getenv("CONCORD_NODE_DIR"), "pids", "unshare.pid"))
	if err != nil {
		t.Fatalf("the node's pid (CONCORD_NODE_DIR from env.sh): %v", err)
	}
	imp := exec.Command("nsenter", "-t", strings.TrimSpace(string(pid)), "-m", "-n",
		"ctr", "-a", "/run/containerd/containerd.sock", "-n", "k8s.io", "images", "import", tar)
	if out, err := imp.CombinedOutput(); err != nil {
		t.Fatalf("import %s: %v\n%s", image, err, out)
	}
	return filepath.Join(dir, "charts", "concord"), image
}

// helmUpgrade upgrades the suite's release to the chart in dir running the
// operator image, and waits for it.
func helmUpgrade(ctx context.Context, dir, image string) error {
	settings := cli.New()
	settings.KubeConfig = nd.kubeconfig
	settings.SetNamespace(operatorNS)
	cfg := new(action.Configuration)
	if err := cfg.Init(settings.RESTClientGetter(), operatorNS, "secret", func(string, ...any) {}); err != nil {
		return fmt.Errorf("helm init: %w", err)
	}
	chart, err := loader.Load(dir)
	if err != nil {
		return fmt.Errorf("load chart %s: %w", dir, err)
	}
	repo, tag, _ := strings.Cut(image, ":")
	up := action.NewUpgrade(cfg)
	up.Namespace, up.Wait, up.Timeout = operatorNS, true, 4*time.Minute
	_, err = up.RunWithContext(ctx, "concord", chart, map[string]any{"operator": map[string]any{
		"image": map[string]any{"repository": repo, "tag": tag, "pullPolicy": "Never"}, "autoscaleInterval": "5s", "logLevel": "debug",
	}})
	if err != nil {
		return fmt.Errorf("helm upgrade to %s: %w", chart.Metadata.Version, err)
	}
	return nil
}

// operatorRuns waits until every pod of the operator Deployment runs image
// and is ready.
func operatorRuns(t *testing.T, ctx context.Context, image string) {
	t.Helper()
	deadline := time.Now().Add(4 * time.Minute)
	for {
		var d appsv1.Deployment
		err := k8s.Get(ctx, client.ObjectKey{Namespace: operatorNS, Name: "concord-operator"}, &d)
		if err == nil && d.Spec.Template.Spec.Containers[0].Image == image && d.Status.ObservedGeneration == d.Generation &&
			d.Status.UpdatedReplicas == *d.Spec.Replicas && d.Status.ReadyReplicas == *d.Spec.Replicas && d.Status.Replicas == *d.Spec.Replicas {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("operator Deployment not rolled out with %s (err %v)", image, err)
		}
		time.Sleep(time.Second) // rollout status is polled, as kubectl rollout status does
	}
}

// rolledOut waits until every Deployment and StatefulSet of the suite's
// cluster has rolled out its current template (what `kubectl rollout
// status` waits for) and the GatewayPool serves only pods of its current
// revision: a Ready condition alone may predate a roll the new operator
// starts.
func rolledOut(t *testing.T, ctx context.Context, when string) {
	t.Helper()
	deadline := time.Now().Add(8 * time.Minute)
	sel := client.MatchingLabels{concordv1.LabelCluster: clusterName}
	for {
		var pending []string
		var ds appsv1.DeploymentList
		var ss appsv1.StatefulSetList
		var pool concordv1.GatewayPool
		err := k8s.List(ctx, &ds, client.InNamespace(ns), sel)
		if err == nil {
			err = k8s.List(ctx, &ss, client.InNamespace(ns), sel)
		}
		if err == nil {
			err = k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: poolName}, &pool)
		}
		for _, d := range ds.Items {
			if d.Status.ObservedGeneration != d.Generation || d.Status.UpdatedReplicas != *d.Spec.Replicas ||
				d.Status.ReadyReplicas != *d.Spec.Replicas || d.Status.Replicas != *d.Spec.Replicas {
				pending = append(pending, "deployment/"+d.Name)
			}
		}
		for _, st := range ss.Items {
			if st.Status.ObservedGeneration != st.Generation || st.Status.UpdateRevision != st.Status.CurrentRevision ||
				st.Status.UpdatedReplicas != *st.Spec.Replicas || st.Status.ReadyReplicas != *st.Spec.Replicas {
				pending = append(pending, "statefulset/"+st.Name)
			}
		}
		if want := *pool.Spec.Replicas; pool.Status.ObservedGeneration != pool.Generation || pool.Status.UpdatedReplicas != want ||
			pool.Status.ReadyReplicas != want || pool.Status.DrainingPods != 0 {
			pending = append(pending, "gatewaypool/"+poolName)
		}
		if err == nil && len(pending) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not rolled out: %v (err %v)\n%s", when, pending, err, podReport(ctx))
		}
		time.Sleep(2 * time.Second) // rollout status is polled, as kubectl rollout status does
	}
}

// TestChartUpgrade: the release goes back to the previous chart version
// (its chart from git, its operator built from the same commit and
// imported into the node) and then forward to this checkout's the way
// docs/operations.md tells a platform team to upgrade: the CRDs applied
// server-side first, then helm upgrade. It runs with three guild pods, and
// through both steps three guilds are in use: two sessions per guild kept
// as a bot library keeps them (RESUME on op 7 or a dropped connection) and
// one poster per guild posting every second with a library's retries.
// After each step the operator runs the step's image and the suite's
// ConcordCluster, GatewayPool and VoiceRegion are Ready again under it;
// after the upgrade the workloads carry what the new operator renders
// (topology spread). Then: no post failed (the guilds kept serving), every
// acknowledged message is in its channel's history and reached every
// session of its guild, no session was refused a RESUME, a message posted
// before the downgrade is still in the history and a new session receives
// a new message.
func TestChartUpgrade(t *testing.T) {
	ctx := context.Background()
	ref, prevVersion, current := previousChart(t)
	t.Logf("previous chart %s at %s; current %s", prevVersion, ref, current)
	prevDir, prevImage := previousRelease(t, ref)
	w := newWorld(t, "upgrade")
	before := post(t, w.owner, w.channel, "before the upgrade")
	guildPods := scaleGuilds(t, ctx, 3)

	ready := func(when string) {
		t.Helper()
		for _, o := range []struct {
			obj  client.Object
			name string
		}{{&concordv1.ConcordCluster{}, clusterName}, {&concordv1.GatewayPool{}, poolName}, {&concordv1.VoiceRegion{}, regionName}} {
			if err := awaitCondition(ctx, o.obj, o.name, concordv1.ConditionReady, 5*time.Minute); err != nil {
				t.Fatalf("%s: %v", when, err)
			}
		}
	}
	type guildLoad struct {
		w        world
		sessions []*keptSession
		poster   *poster
	}
	var loads []guildLoad
	for i := range 3 {
		lw := w
		if i > 0 {
			lw = newWorld(t, fmt.Sprintf("upgrade%d", i))
		}
		l := guildLoad{w: lw}
		for j := range 2 {
			l.sessions = append(l.sessions, keepSession(t, lw.member, fmt.Sprintf("guild%d-session%d", i, j)))
		}
		l.poster = startPoster(lw.owner, lw.channel, fmt.Sprintf("upgrade load %d", i))
		loads = append(loads, l)
	}
	if err := helmUpgrade(ctx, prevDir, prevImage); err != nil {
		t.Fatal(err)
	}
	operatorRuns(t, ctx, prevImage)
	rolledOut(t, ctx, "on the previous chart "+prevVersion)
	ready("on the previous chart " + prevVersion)

	if err := applyCRDs(ctx, filepath.Join("..", "..", "charts", "concord", "crds")); err != nil {
		t.Fatal(err)
	}
	if err := helmUpgrade(ctx, filepath.Join("..", "..", "charts", "concord"), nd.operatorImage); err != nil {
		t.Fatal(err)
	}
	operatorRuns(t, ctx, nd.operatorImage)
	// The new operator's templates are rolled out: the api Deployment has
	// the topology spread it renders.
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var d appsv1.Deployment
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: clusterName + "-api"}, &d)
		if err == nil && len(d.Spec.Template.Spec.TopologySpreadConstraints) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the api Deployment has no topology spread from the upgraded operator (err %v)", err)
		}
		time.Sleep(time.Second)
	}
	rolledOut(t, ctx, "after the upgrade to "+current)
	ready("after the upgrade to " + current)

	replaced := 0
	for name, uid := range guildPods {
		p, err := kcs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || p.UID != uid {
			replaced++
		}
	}
	t.Logf("%d of %d guild pods were replaced by the downgrade and the upgrade", replaced, len(guildPods))
	for i, l := range loads {
		acked, failed := l.poster.finish()
		if len(failed) > 0 {
			t.Errorf("guild %d: %d of %d posts failed after retries: the guild stopped serving: %v", i, len(failed), len(acked)+len(failed), failed)
		}
		if len(acked) == 0 {
			t.Fatalf("guild %d: no post was acknowledged during the upgrade", i)
		}
		inHistory := history(t, l.w.owner, l.w.channel)
		for _, id := range acked {
			if !inHistory[id] {
				t.Errorf("guild %d: acknowledged message %s is missing from the channel's history", i, id)
			}
		}
		for _, k := range l.sessions {
			missing, resumes, err := k.missing(acked, 30*time.Second)
			if err != nil {
				t.Errorf("guild %d: %v", i, err)
			}
			if len(missing) > 0 {
				var when []string
				for _, id := range missing {
					when = append(when, id+" acked at "+l.poster.ackedAt(id))
				}
				t.Errorf("%s: %d of %d acknowledged messages never arrived (resumed %d times): %v", k.name, len(missing), len(acked), resumes, when)
				continue
			}
			t.Logf("%s: received all %d acknowledged messages, resumed %d times", k.name, len(acked), resumes)
		}
	}

	if !history(t, w.owner, w.channel)[before] {
		t.Fatalf("message %s posted before the upgrade is missing from the history after it", before)
	}
	c := dial(t, w.member, "after-upgrade")
	post(t, w.owner, w.channel, "after the upgrade")
	if err := c.Await("the message after the upgrade", time.Minute, hasMessage("after the upgrade")); err != nil {
		t.Fatal(err)
	}
}

// scaleGuilds sets the suite cluster's guild replicas to n, waits until
// the cluster has rolled out, and returns the StatefulSet's guild pods' names
// and UIDs (a GuildPlacement's dedicated pods are not among them);
// when the test ends it goes back to one guild pod.
func scaleGuilds(t *testing.T, ctx context.Context, n int) map[string]k8stypes.UID {
	t.Helper()
	c := &concordv1.ConcordCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: clusterName}}
	set := func(ctx context.Context, n int) error {
		return k8s.Patch(ctx, c, client.RawPatch(k8stypes.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"roles":{"guild":{"replicas":%d}}}}`, n))))
	}
	if err := set(ctx, n); err != nil {
		t.Fatalf("scale the guild role to %d: %v", n, err)
	}
	t.Cleanup(func() {
		if err := set(context.Background(), 1); err != nil {
			t.Errorf("scale the guild role back to 1: %v", err)
			return
		}
		rolledOut(t, context.Background(), "back to one guild pod")
	})
	// The operator applies the new size to the guild StatefulSet a moment
	// after the patch: until the StatefulSet asks for n, a rollout check
	// would pass on the old size.
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var sts appsv1.StatefulSetList
		err := k8s.List(ctx, &sts, client.InNamespace(ns), client.MatchingLabels{concordv1.LabelCluster: clusterName, concordv1.LabelRole: concordv1.RoleGuild})
		if err == nil && len(sts.Items) == 1 && *sts.Items[0].Spec.Replicas == int32(n) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the guild StatefulSet does not ask for %d replicas (%d StatefulSets, err %v)", n, len(sts.Items), err)
		}
		time.Sleep(time.Second) // the operator's apply is observed through the API: polled
	}
	rolledOut(t, ctx, fmt.Sprintf("with %d guild pods", n))
	pods, err := kcs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: concordv1.LabelCluster + "=" + clusterName + "," + concordv1.LabelRole + "=" + concordv1.RoleGuild})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]k8stypes.UID{}
	for _, p := range pods.Items {
		for _, ref := range p.OwnerReferences {
			if ref.Kind == "StatefulSet" && podReady(&p) && p.DeletionTimestamp == nil {
				out[p.Name] = p.UID
			}
		}
	}
	if len(out) != n {
		t.Fatalf("%d ready guild pods of the StatefulSet (%v), want %d\n%s", len(out), out, n, podReport(ctx))
	}
	return out
}
