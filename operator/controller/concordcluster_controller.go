package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
)

// ConcordClusterReconciler turns a ConcordCluster into the runtime roles'
// Deployments (api, data, readstate, presence, relay, and the live roles
// of spec.live), the guild StatefulSet,
// their Services and PodDisruptionBudgets and the connection ConfigMap, all
// owned by the cluster. Its finalizer deletes the cluster's GuildPlacements
// and RelayTiers first, so their registry pins and relay lists are released
// while the registry is still reachable.
type ConcordClusterReconciler struct {
	Client   client.Client
	Scheme   *runtime.Scheme
	Clock    clock.PassiveClock
	Recorder events.EventRecorder
}

// +kubebuilder:rbac:groups=concord.dev,resources=concordclusters,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=concord.dev,resources=concordclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=concord.dev,resources=concordclusters/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=services;configmaps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// Reconcile converges one ConcordCluster in named steps: fetch it;
// finalize a deleted cluster; add the finalizer; apply its children
// (reconcileChildren: applyConfig, pruneLive, applyWorkloads,
// applyServices, applyBudgets); write status.
func (r *ConcordClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx)
	var c concordv1.ConcordCluster
	if err := r.Client.Get(ctx, req.NamespacedName, &c); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !c.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, &c)
	}
	if controllerutil.AddFinalizer(&c, concordv1.Finalizer) {
		if err := r.Client.Update(ctx, &c); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}

	if err := r.reconcileChildren(ctx, &c); err != nil {
		setCondition(&c.Status.Conditions, c.Generation, concordv1.ConditionDegraded, true, "ApplyFailed", err.Error())
		_ = updateStatus(ctx, r.Client, &c, "ConcordCluster")
		return ctrl.Result{}, err
	}
	if err := r.status(ctx, &c); err != nil {
		return ctrl.Result{}, err
	}
	log.V(1).Info("cluster reconciled", "readyRoles", c.Status.ReadyRoles)
	if !meta.IsStatusConditionTrue(c.Status.Conditions, concordv1.ConditionReady) {
		// A pod's container state (a crash loop, an image that cannot be
		// pulled) changes no workload this controller watches: look again
		// so Degraded says why.
		return ctrl.Result{RequeueAfter: notReadyResync}, nil
	}
	return ctrl.Result{}, nil
}

// notReadyResync is how often a cluster that is not Ready is looked at
// again.
const notReadyResync = 15 * time.Second

// status reads each role's workload and the cluster's placements, and
// writes the roles' replicas and the conditions: Ready when every role has
// its ready replicas, Progressing while one waits for them, Degraded when
// pods of the cluster's roles cannot run (ReasonPodsFailing, naming them).
func (r *ConcordClusterReconciler) status(ctx context.Context, c *concordv1.ConcordCluster) error {
	c.Status.Roles = c.Status.Roles[:0]
	ready := 0
	roles := activeRoles(c)
	for _, role := range roles {
		rs := concordv1.RoleStatus{Name: role}
		key := types.NamespacedName{Namespace: c.Namespace, Name: workloadName(c, role)}
		if role == concordv1.RoleGuild {
			var s appsv1.StatefulSet
			if err := r.Client.Get(ctx, key, &s); err != nil {
				return fmt.Errorf("get StatefulSet %s: %w", key, err)
			}
			rs.Replicas, rs.ReadyReplicas = int32Or(s.Spec.Replicas, 0), s.Status.ReadyReplicas
		} else {
			var d appsv1.Deployment
			if err := r.Client.Get(ctx, key, &d); err != nil {
				return fmt.Errorf("get Deployment %s: %w", key, err)
			}
			rs.Replicas, rs.ReadyReplicas = int32Or(d.Spec.Replicas, 0), d.Status.ReadyReplicas
		}
		if rs.ReadyReplicas >= rs.Replicas {
			ready++
		}
		c.Status.Roles = append(c.Status.Roles, rs)
	}
	var placements concordv1.GuildPlacementList
	if err := r.Client.List(ctx, &placements, client.InNamespace(c.Namespace)); err != nil {
		return fmt.Errorf("list GuildPlacements: %w", err)
	}
	c.Status.DedicatedGuilds = 0
	for _, p := range placements.Items {
		if p.Spec.ClusterRef.Name == c.Name {
			c.Status.DedicatedGuilds++
		}
	}
	failing, err := r.failingRolePods(ctx, c, roles)
	if err != nil {
		return err
	}
	c.Status.ReadyRoles = fmt.Sprintf("%d/%d", ready, len(roles))
	if ready == len(roles) {
		setCondition(&c.Status.Conditions, c.Generation, concordv1.ConditionReady, true, "RolesReady", "every role has its ready replicas")
		setCondition(&c.Status.Conditions, c.Generation, concordv1.ConditionProgressing, false, "Converged", "")
	} else {
		msg := fmt.Sprintf("%d of %d roles ready", ready, len(roles))
		setCondition(&c.Status.Conditions, c.Generation, concordv1.ConditionReady, false, "RolesNotReady", msg+failing)
		setCondition(&c.Status.Conditions, c.Generation, concordv1.ConditionProgressing, true, "WaitingForReplicas", msg)
	}
	if failing != "" {
		setCondition(&c.Status.Conditions, c.Generation, concordv1.ConditionDegraded, true, ReasonPodsFailing, strings.TrimPrefix(failing, "; "))
	} else {
		setCondition(&c.Status.Conditions, c.Generation, concordv1.ConditionDegraded, false, "Applied", "")
	}
	c.Status.ObservedGeneration = c.Generation
	return updateStatus(ctx, r.Client, c, "ConcordCluster")
}

// failingRolePods describes the pods of the cluster's own roles (not the
// pools', regions' or tiers', which report their own) that cannot run.
func (r *ConcordClusterReconciler) failingRolePods(ctx context.Context, c *concordv1.ConcordCluster, roles []string) (string, error) {
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(c.Namespace), client.MatchingLabels{concordv1.LabelCluster: c.Name}); err != nil {
		return "", fmt.Errorf("list pods of cluster %s: %w", c.Name, err)
	}
	mine := pods.Items[:0]
	for _, p := range pods.Items {
		// The role workloads' pods carry the cluster as their owner label;
		// a pool's, region's or tier's carry theirs.
		if slices.Contains(roles, p.Labels[concordv1.LabelRole]) && p.Labels[concordv1.LabelOwner] == c.Name {
			mine = append(mine, p)
		}
	}
	return failingPods(mine), nil
}

// clusterRound is what one reconcile of a ConcordCluster knows, as the
// steps go: the cluster and the roles it runs.
type clusterRound struct {
	c     *concordv1.ConcordCluster
	roles []string
}

// reconcileChildren creates or updates every owned object, in named
// steps: the connection ConfigMap; the live roles' objects deleted when
// spec.live is gone; each role's workload (the guild StatefulSet, a
// Deployment for the others); each role's Service; each role's
// PodDisruptionBudget.
func (r *ConcordClusterReconciler) reconcileChildren(ctx context.Context, c *concordv1.ConcordCluster) error {
	rd := &clusterRound{c: c, roles: activeRoles(c)}
	for _, step := range []func(context.Context, *clusterRound) error{
		r.applyConfig, r.pruneLive, r.applyWorkloads, r.applyServices, r.applyBudgets,
	} {
		if err := step(ctx, rd); err != nil {
			return err
		}
	}
	return nil
}

// applyConfig writes the ConfigMap of the cluster's connection settings.
func (r *ConcordClusterReconciler) applyConfig(ctx context.Context, rd *clusterRound) error {
	c := rd.c
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: configMapName(c)}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, cm, func() error {
		data, err := configData(c)
		if err != nil {
			return fmt.Errorf("render config: %w", err)
		}
		cm.Labels = withLabels(cm.Labels, roleLabels(c, "config"))
		cm.Data = data
		return controllerutil.SetControllerReference(c, cm, r.Scheme)
	}); err != nil {
		return fmt.Errorf("apply ConfigMap %s: %w", cm.Name, err)
	}
	return nil
}

// pruneLive deletes the live roles' objects when spec.live is gone.
func (r *ConcordClusterReconciler) pruneLive(ctx context.Context, rd *clusterRound) error {
	if rd.c.Spec.Live != nil {
		return nil
	}
	return r.removeLive(ctx, rd.c)
}

// applyWorkloads writes each role's workload: the guild role's
// StatefulSet (stable names on the ring), a Deployment for every other.
func (r *ConcordClusterReconciler) applyWorkloads(ctx context.Context, rd *clusterRound) error {
	c := rd.c
	for _, role := range rd.roles {
		meta := metav1.ObjectMeta{Namespace: c.Namespace, Name: workloadName(c, role)}
		if role == concordv1.RoleGuild {
			s := &appsv1.StatefulSet{ObjectMeta: meta}
			if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, s, func() error {
				mutateStatefulSet(c, role, s)
				return controllerutil.SetControllerReference(c, s, r.Scheme)
			}); err != nil {
				return fmt.Errorf("apply StatefulSet %s: %w", s.Name, err)
			}
			continue
		}
		d := &appsv1.Deployment{ObjectMeta: meta}
		if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, d, func() error {
			mutateDeployment(c, role, d)
			return controllerutil.SetControllerReference(c, d, r.Scheme)
		}); err != nil {
			return fmt.Errorf("apply Deployment %s: %w", d.Name, err)
		}
	}
	return nil
}

// applyServices writes the Service of each role that has one (hasService).
func (r *ConcordClusterReconciler) applyServices(ctx context.Context, rd *clusterRound) error {
	c := rd.c
	for _, role := range rd.roles {
		if !hasService(role) {
			continue
		}
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: workloadName(c, role)}}
		if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, svc, func() error {
			mutateService(c, role, svc)
			return controllerutil.SetControllerReference(c, svc, r.Scheme)
		}); err != nil {
			return fmt.Errorf("apply Service %s: %w", svc.Name, err)
		}
	}
	return nil
}

// applyBudgets writes each role's PodDisruptionBudget.
func (r *ConcordClusterReconciler) applyBudgets(ctx context.Context, rd *clusterRound) error {
	c := rd.c
	for _, role := range rd.roles {
		pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: workloadName(c, role)}}
		if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, pdb, func() error {
			mutatePDB(c, role, pdb)
			return controllerutil.SetControllerReference(c, pdb, r.Scheme)
		}); err != nil {
			return fmt.Errorf("apply PodDisruptionBudget %s: %w", pdb.Name, err)
		}
	}
	return nil
}

// removeLive deletes the live roles' objects of a cluster whose spec.live
// was removed.
func (r *ConcordClusterReconciler) removeLive(ctx context.Context, c *concordv1.ConcordCluster) error {
	for _, role := range liveRoles {
		meta := metav1.ObjectMeta{Namespace: c.Namespace, Name: workloadName(c, role)}
		// The cached Deployment tells whether the role ever ran, so a
		// cluster without spec.live costs no API calls here.
		var d appsv1.Deployment
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: meta.Namespace, Name: meta.Name}, &d); apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			return fmt.Errorf("get Deployment %s: %w", meta.Name, err)
		}
		for _, o := range []client.Object{&policyv1.PodDisruptionBudget{ObjectMeta: meta}, &corev1.Service{ObjectMeta: meta}, &appsv1.Deployment{ObjectMeta: meta}} {
			if err := r.Client.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("delete %T %s: %w", o, meta.Name, err)
			}
		}
	}
	return nil
}

// finalize deletes the cluster's GuildPlacements and RelayTiers and waits
// for their own finalizers (registry releases) before letting go.
func (r *ConcordClusterReconciler) finalize(ctx context.Context, c *concordv1.ConcordCluster) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(c, concordv1.Finalizer) {
		return ctrl.Result{}, nil
	}
	log := logf.FromContext(ctx)
	remaining := 0
	var placements concordv1.GuildPlacementList
	if err := r.Client.List(ctx, &placements, client.InNamespace(c.Namespace)); err != nil {
		return ctrl.Result{}, fmt.Errorf("list GuildPlacements: %w", err)
	}
	for i := range placements.Items {
		p := &placements.Items[i]
		if p.Spec.ClusterRef.Name != c.Name {
			continue
		}
		remaining++
		if p.DeletionTimestamp.IsZero() {
			if err := r.Client.Delete(ctx, p); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, fmt.Errorf("delete GuildPlacement %s: %w", p.Name, err)
			}
		}
	}
	var tiers concordv1.RelayTierList
	if err := r.Client.List(ctx, &tiers, client.InNamespace(c.Namespace)); err != nil {
		return ctrl.Result{}, fmt.Errorf("list RelayTiers: %w", err)
	}
	for i := range tiers.Items {
		t := &tiers.Items[i]
		if t.Spec.ClusterRef.Name != c.Name {
			continue
		}
		remaining++
		if t.DeletionTimestamp.IsZero() {
			if err := r.Client.Delete(ctx, t); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, fmt.Errorf("delete RelayTier %s: %w", t.Name, err)
			}
		}
	}
	if remaining > 0 {
		log.Info("waiting for dependents to release", "remaining", remaining)
		return ctrl.Result{RequeueAfter: 2 * time.Second}, nil
	}
	controllerutil.RemoveFinalizer(c, concordv1.Finalizer)
	if err := r.Client.Update(ctx, c); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("remove finalizer: %w", err)
	}
	return ctrl.Result{}, nil
}

// SetupWithManager registers the reconciler.
func (r *ConcordClusterReconciler) SetupWithManager(mgr ctrl.Manager) error {
	byCluster := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		var name string
		switch v := o.(type) {
		case *concordv1.GuildPlacement:
			name = v.Spec.ClusterRef.Name
		case *concordv1.RelayTier:
			name = v.Spec.ClusterRef.Name
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		For(&concordv1.ConcordCluster{}).
		Owns(&appsv1.Deployment{}).
		Owns(&appsv1.StatefulSet{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Watches(&concordv1.GuildPlacement{}, byCluster).
		Watches(&concordv1.RelayTier{}, byCluster).
		Named("concordcluster").
		Complete(r)
}
