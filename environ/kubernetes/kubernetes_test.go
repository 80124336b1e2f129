package kubernetes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/juju/clock/testclock"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/sqlite"
	"github.com/berth-dev/berth/environ"
	runtimetype "github.com/berth-dev/berth/environ/runtime"
)

const (
	testID   = "0b6e4f6a-1c2d-4e5f-8a9b-0c1d2e3f4a5b"
	testPID  = "0b6e4f6a1c2d4e5f8a9b0c1d2e3f4a5b"
	otherID  = "11111111-2222-4333-8444-555555555555"
	testSpec = `{"host": "http://node-*.localhost", "namespace": "ns", "image": "rilldata/rill", "timeout_seconds": 30}`
)

// resourceSet is a ResourceGetter over a set of live resource ids.
type resourceSet struct {
	mu    sync.Mutex
	ids   map[string]bool
	moved map[string]domain.Resource // what a lookup of the id answers instead, when set
	err   error                      // returned for every lookup when set
}

func (s *resourceSet) GetResource(_ context.Context, id string) (domain.Resource, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return domain.Resource{}, s.err
	}
	if !s.ids[id] {
		return domain.Resource{}, fmt.Errorf("resource %s: %w", id, domain.ErrNotFound)
	}
	if r, ok := s.moved[id]; ok {
		return r, nil
	}
	return domain.Resource{ID: id}, nil
}

type testEnv struct {
	*kubeEnviron
	clock     *testclock.Clock
	resources *resourceSet
}

func newTestEnviron(t *testing.T, spec string, objects ...runtime.Object) (*testEnv, *fake.Clientset) {
	t.Helper()
	cs := fake.NewClientset(objects...)
	return newTestEnvironWith(t, spec, cs, bytes.Repeat([]byte{0xab}, 1024)), cs
}

func newTestEnvironWith(t *testing.T, spec string, cs *fake.Clientset, random []byte) *testEnv {
	t.Helper()
	return newTestEnvironOn(t, spec, cs, random, openSlots(t), &strings.Builder{})
}

// newTestEnvironOn is newTestEnvironWith on the slot store slots, logging to log.
func newTestEnvironOn(t *testing.T, spec string, cs *fake.Clientset, random []byte, slots domain.SlotStore, log io.Writer) *testEnv {
	t.Helper()
	clk := testclock.NewClock(time.Unix(0, 0))
	resources := &resourceSet{ids: map[string]bool{testID: true, otherID: true}}
	deps := environ.Deps{Clock: clk, Resources: resources, Slots: slots, Logger: slog.New(slog.NewTextHandler(log, nil))}
	e, err := newEnviron("k8s", json.RawMessage(spec), deps, cs, bytes.NewReader(random))
	if err != nil {
		t.Fatalf("newEnviron: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return &testEnv{kubeEnviron: e, clock: clk, resources: resources}
}

// openSlots opens the real SQLite store, migrated, as the slot quota's reservations.
func openSlots(t *testing.T) *sqlite.State {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "berth.db"))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(st.Close)
	if err := st.Migrate(t.Context()); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return st
}

func runtimeResource(id string) *environ.Resource {
	return &environ.Resource{ID: id, Type: domain.ResourceTypeRuntime}
}

func reconcile(t *testing.T, e *testEnv, r *environ.Resource, args map[string]any) *environ.Resource {
	t.Helper()
	res, err := e.Reconcile(t.Context(), r, &environ.ResourceOptions{Args: args})
	if err != nil {
		t.Fatalf("Reconcile %s: %v", r.ID, err)
	}
	return res
}

// applies counts the server-side applies the fake client has seen, and forgets them.
func applies(cs *fake.Clientset) []string {
	var out []string
	for _, a := range cs.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok && p.GetPatchType() == "application/apply-patch+yaml" {
			out = append(out, a.GetResource().Resource+"/"+p.GetName())
		}
	}
	cs.ClearActions()
	return out
}

func TestReconcileRendersLabelsSizingAndHost(t *testing.T) {
	e, cs := newTestEnviron(t, testSpec)
	res := reconcile(t, e, runtimeResource(testID), map[string]any{"slots": 2, "version": "0.50.1"})

	wantConfig := (&runtimetype.Config{
		Host: "http://node-" + testPID + ".localhost", Audience: "http://node-" + testPID + ".localhost",
		CPU: 2, MemoryGB: 8, StorageBytes: 80 << 30,
	}).AsMap()
	if fmt.Sprint(res.Config) != fmt.Sprint(wantConfig) {
		t.Errorf("config = %v, want %v", res.Config, wantConfig)
	}
	if res.State["provision_id"] != testPID || res.State["kind"] != "runtime" || len(res.State["checksum"].(string)) != 64 || len(res.State) != 3 {
		t.Errorf("state = %v", res.State)
	}
	checksum := res.State["checksum"].(string)
	name := "rt-" + testPID

	ctx := t.Context()
	d, err := cs.AppsV1().Deployments("ns").Get(ctx, name, metaGet)
	if err != nil {
		t.Fatal(err)
	}
	wantLabels := map[string]string{
		"app.kubernetes.io/managed-by": "berth", "berth.dev/resource-id": testID,
		"berth.dev/provisioner": "k8s", "berth.dev/resource-type": "runtime",
	}
	for k, v := range wantLabels {
		if d.Labels[k] != v || d.Spec.Template.Labels[k] != v {
			t.Errorf("label %s = %q (pod template %q), want %q", k, d.Labels[k], d.Spec.Template.Labels[k], v)
		}
	}
	if d.Annotations[AnnotationChecksum] != checksum || d.Spec.Template.Annotations[AnnotationChecksum] != checksum || d.Annotations[AnnotationSlots] != "2" {
		t.Errorf("deployment annotations = %v, pod template %v", d.Annotations, d.Spec.Template.Annotations)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if c.Image != "rilldata/rill:0.50.1" || c.Resources.Requests.Cpu().String() != "2" || c.Resources.Limits.Memory().String() != "8Gi" {
		t.Errorf("container image %s, resources %v", c.Image, c.Resources)
	}
	pvc, err := cs.CoreV1().PersistentVolumeClaims("ns").Get(ctx, name, metaGet)
	if err != nil {
		t.Fatal(err)
	}
	if q := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; q.String() != "80Gi" || pvc.Labels["berth.dev/resource-id"] != testID {
		t.Errorf("pvc size %s, labels %v", q.String(), pvc.Labels)
	}
	for _, ing := range []string{name + "-http", name + "-grpc"} {
		i, err := cs.NetworkingV1().Ingresses("ns").Get(ctx, ing, metaGet)
		if err != nil {
			t.Fatal(err)
		}
		if i.Spec.Rules[0].Host != "node-"+testPID+".localhost" || i.Annotations[AnnotationChecksum] != checksum {
			t.Errorf("ingress %s host %s", ing, i.Spec.Rules[0].Host)
		}
	}
	if _, err := cs.CoreV1().Services("ns").Get(ctx, name, metaGet); err != nil {
		t.Fatal(err)
	}
}

func TestReconcileTwiceAppliesNothing(t *testing.T) {
	e, cs := newTestEnviron(t, testSpec)
	first := reconcile(t, e, runtimeResource(testID), map[string]any{"slots": 1})
	name := "rt-" + testPID
	want := []string{"persistentvolumeclaims/" + name, "services/" + name, "deployments/" + name, "ingresses/" + name + "-http", "ingresses/" + name + "-grpc"}
	if got := applies(cs); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("first reconcile applied %v, want %v", got, want)
	}
	second := reconcile(t, e, runtimeResource(testID), map[string]any{"slots": 1})
	if got := applies(cs); len(got) != 0 {
		t.Fatalf("second reconcile applied %v, want nothing", got)
	}
	if first.State["checksum"] != second.State["checksum"] {
		t.Errorf("checksum changed without a change: %v -> %v", first.State["checksum"], second.State["checksum"])
	}
}

// TestReconcileReadsEachObjectOnce: a reconcile reads every object once, the claim included
// (read to keep it from shrinking, and compared from that read), so that a hundred runtimes
// created at once cost the API server no more requests than they need.
func TestReconcileReadsEachObjectOnce(t *testing.T) {
	e, cs := newTestEnviron(t, testSpec)
	for _, round := range []string{"first", "second"} {
		cs.ClearActions()
		reconcile(t, e, runtimeResource(testID), map[string]any{"slots": 1})
		reads := map[string]int{}
		for _, a := range cs.Actions() {
			if g, ok := a.(k8stesting.GetAction); ok && a.GetVerb() == "get" {
				reads[a.GetResource().Resource+"/"+g.GetName()]++
			}
		}
		if len(reads) != objectsPerRuntime {
			t.Errorf("%s reconcile read %v, want the %d objects", round, reads, objectsPerRuntime)
		}
		for key, n := range reads {
			if n != 1 {
				t.Errorf("%s reconcile read %s %d times, want once", round, key, n)
			}
		}
	}
}

// objectsPerRuntime is how many objects the built-in runtime templates render.
const objectsPerRuntime = 5

func TestReconcileResizeAndUpgradeRollOut(t *testing.T) {
	e, cs := newTestEnviron(t, testSpec)
	name := "rt-" + testPID
	first := reconcile(t, e, runtimeResource(testID), map[string]any{"slots": 1})
	applies(cs)
	second := reconcile(t, e, runtimeResource(testID), map[string]any{"slots": 3, "version": "v2"})
	if len(applies(cs)) != 5 {
		t.Fatal("resize applied nothing")
	}
	if first.State["checksum"] == second.State["checksum"] {
		t.Error("checksum unchanged by a resize")
	}
	d, err := cs.AppsV1().Deployments("ns").Get(t.Context(), name, metaGet)
	if err != nil {
		t.Fatal(err)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if c.Image != "rilldata/rill:v2" || c.Resources.Limits.Cpu().String() != "3" || c.Resources.Requests.Memory().String() != "12Gi" {
		t.Errorf("after resize: image %s resources %v", c.Image, c.Resources)
	}
	if d.Spec.Template.Annotations[AnnotationChecksum] != second.State["checksum"] {
		t.Error("pod template checksum not updated: no rollout")
	}
	if second.Config["cpu"] != 3 || second.Config["storage_bytes"] != int64(120<<30) {
		t.Errorf("config after resize = %v", second.Config)
	}
}

func TestReconcileDoesNotShrinkVolumes(t *testing.T) {
	e, cs := newTestEnviron(t, testSpec)
	reconcile(t, e, runtimeResource(testID), map[string]any{"slots": 3})
	res := reconcile(t, e, runtimeResource(testID), map[string]any{"slots": 2})
	if res.Notice != "volume not shrunk: 80Gi requested, 120Gi kept; volumes only grow" {
		t.Errorf("notice = %q", res.Notice)
	}
	if res.Config["storage_bytes"] != int64(120<<30) || res.Config["cpu"] != 2 {
		t.Errorf("config = %v", res.Config)
	}
	pvc, err := cs.CoreV1().PersistentVolumeClaims("ns").Get(t.Context(), "rt-"+testPID, metaGet)
	if err != nil {
		t.Fatal(err)
	}
	if q := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; q.String() != "120Gi" {
		t.Errorf("pvc shrunk to %s", q.String())
	}
	applies(cs)
	again := reconcile(t, e, runtimeResource(testID), map[string]any{"slots": 2})
	if got := applies(cs); len(got) != 0 || again.Notice == "" {
		t.Errorf("reconcile after a refused shrink applied %v, notice %q", got, again.Notice)
	}
}

// TestReconcileGrowsPendingVolumesOnceBound: the API cannot resize a claim before it is
// bound, so a resize keeps a pending claim's size (and says so) but rolls out the rest, and
// the claim grows on the first reconcile after binding.
func TestReconcileGrowsPendingVolumesOnceBound(t *testing.T) {
	e, cs := newTestEnviron(t, testSpec)
	name := "rt-" + testPID
	reconcile(t, e, runtimeResource(testID), map[string]any{"slots": 1})
	setClaimPhase(t, cs, name, corev1.ClaimPending)

	res := reconcile(t, e, runtimeResource(testID), map[string]any{"slots": 2})
	if res.Notice != "volume not grown yet: 80Gi requested, 40Gi kept until the claim is bound (its pod is scheduled)" {
		t.Errorf("notice = %q", res.Notice)
	}
	if res.Config["storage_bytes"] != int64(40<<30) || res.Config["cpu"] != 2 {
		t.Errorf("config = %v", res.Config)
	}
	if q := claimSize(t, cs, name); q != "40Gi" {
		t.Errorf("pending claim resized to %s", q)
	}
	d, err := cs.AppsV1().Deployments("ns").Get(t.Context(), name, metaGet)
	if err != nil {
		t.Fatal(err)
	}
	if cpu := d.Spec.Template.Spec.Containers[0].Resources.Requests.Cpu().String(); cpu != "2" {
		t.Errorf("deployment not resized with its claim pending: cpu %s", cpu)
	}

	setClaimPhase(t, cs, name, corev1.ClaimBound)
	res = reconcile(t, e, runtimeResource(testID), map[string]any{"slots": 2})
	if res.Notice != "" || res.Config["storage_bytes"] != int64(80<<30) {
		t.Errorf("after binding: notice %q, config %v", res.Notice, res.Config)
	}
	if q := claimSize(t, cs, name); q != "80Gi" {
		t.Errorf("bound claim not grown: %s", q)
	}
}

func setClaimPhase(t *testing.T, cs *fake.Clientset, name string, phase corev1.PersistentVolumeClaimPhase) {
	t.Helper()
	pvc, err := cs.CoreV1().PersistentVolumeClaims("ns").Get(t.Context(), name, metaGet)
	if err != nil {
		t.Fatal(err)
	}
	pvc.Status.Phase = phase
	if _, err := cs.CoreV1().PersistentVolumeClaims("ns").UpdateStatus(t.Context(), pvc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func claimSize(t *testing.T, cs *fake.Clientset, name string) string {
	t.Helper()
	pvc, err := cs.CoreV1().PersistentVolumeClaims("ns").Get(t.Context(), name, metaGet)
	if err != nil {
		t.Fatal(err)
	}
	q := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	return q.String()
}

func TestReconcileRejectsBadArgsPermanently(t *testing.T) {
	e, _ := newTestEnviron(t, testSpec)
	for _, args := range []map[string]any{{"slots": 0}, {"cpus": 1}, {"version": "a b"}} {
		_, err := e.Reconcile(t.Context(), runtimeResource(testID), &environ.ResourceOptions{Args: args})
		if err == nil || !environ.IsPermanent(err) || !strings.Contains(err.Error(), "args.") {
			t.Errorf("Reconcile(%v) = %v, want a permanent args error", args, err)
		}
	}
}

// TestReconcileBoundsSlotsBySizing: slots times a per-slot figure never overflows; too many
// slots are refused for good with the bound (a *domain.NeverFitsError: no cluster can hold
// them), and nothing is applied.
func TestReconcileBoundsSlotsBySizing(t *testing.T) {
	tests := []struct {
		name, sizing string
		slots        int64
		largest      int
		want         string
	}{
		{"a petabyte a slot", `, "storage_bytes_per_slot": 1125899906842624`, 8192, 8191, "args.slots: 8192 slots can never fit provisioner \"k8s\": storage_bytes_per_slot 1125899906842624 caps a runtime at 8191 (lower storage_bytes_per_slot in the provisioner set, or ask for at most 8191)"},
		{"largest storage", `, "storage_bytes_per_slot": 9223372036854775807`, 2, 1, "args.slots: 2 slots can never fit provisioner \"k8s\": storage_bytes_per_slot 9223372036854775807 caps a runtime at 1"},
		{"largest memory", `, "memory_gb_per_slot": 8589934591`, 2, 1, "args.slots: 2 slots can never fit provisioner \"k8s\": memory_gb_per_slot 8589934591 caps a runtime at 1"},
		{"largest cpu", `, "cpu_per_slot": 9223372036854775`, 3, 1, "args.slots: 3 slots can never fit provisioner \"k8s\": cpu_per_slot 9223372036854775 caps a runtime at 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, cs := newTestEnviron(t, `{"host": "http://node-*.localhost", "namespace": "ns", "image": "rilldata/rill"`+tc.sizing+`}`)
			_, err := e.Reconcile(t.Context(), runtimeResource(testID), &environ.ResourceOptions{Args: map[string]any{"slots": tc.slots}})
			var nf *domain.NeverFitsError
			if !environ.IsPermanent(err) || !errors.As(err, &nf) || nf.Largest != tc.largest || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Reconcile = %v, want a permanent NeverFitsError saying %q", err, tc.want)
			}
			if got := applies(cs); len(got) != 0 {
				t.Errorf("applied %v", got)
			}
		})
	}

	// At the bound the figures are exact: 3 slots of 2 EiB, and no fourth.
	e, cs := newTestEnviron(t, `{"host": "http://node-*.localhost", "namespace": "ns", "image": "rilldata/rill", "storage_bytes_per_slot": 2305843009213693952}`)
	res := reconcile(t, e, runtimeResource(testID), map[string]any{"slots": 3})
	if got := res.Config["storage_bytes"]; got != int64(3)<<61 {
		t.Errorf("storage_bytes = %v, want %d", got, int64(3)<<61)
	}
	if size := claimSize(t, cs, "rt-"+testPID); size != "6Ei" {
		t.Errorf("claim size %s, want 6Ei", size)
	}
	_, err := e.Reconcile(t.Context(), runtimeResource(testID), &environ.ResourceOptions{Args: map[string]any{"slots": 4}})
	if !environ.IsPermanent(err) || !strings.Contains(err.Error(), "caps a runtime at 3") {
		t.Errorf("Reconcile with 4 slots of 2 EiB = %v", err)
	}
}

// TestSlotQuotaIgnoresEditedAnnotations: the quota counts the reservations in the
// database, so slot counts edited out of band on Deployments (negative, or huge enough to
// overflow a sum) neither free quota nor take it.
func TestSlotQuotaIgnoresEditedAnnotations(t *testing.T) {
	e, cs := newTestEnviron(t, `{"host": "http://node-*.localhost", "namespace": "ns", "image": "rilldata/rill", "slot_quota": 4}`)
	reconcile(t, e, runtimeResource(testID), map[string]any{"slots": 1})
	for i, slots := range []string{"-5", "9223372036854775807", "9223372036854775807"} {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("edited-%d", i), Namespace: "ns",
			Labels:      e.labels(fmt.Sprintf("00000000-0000-4000-8000-00000000000%d", i), domain.ResourceTypeRuntime),
			Annotations: map[string]string{AnnotationSlots: slots},
		}}
		if _, err := cs.AppsV1().Deployments("ns").Create(t.Context(), d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := e.Reconcile(t.Context(), runtimeResource(otherID), &environ.ResourceOptions{Args: map[string]any{"slots": 4}})
	if !errors.Is(err, domain.ErrNoCapacity) || !strings.Contains(err.Error(), "1 of 4 slots in use, 4 more wanted") {
		t.Fatalf("Reconcile of 4 slots with 1 reserved = %v, want ErrNoCapacity counting the reservation only", err)
	}
	reconcile(t, e, runtimeResource(otherID), map[string]any{"slots": 3})
	if c, err := e.Capacity(t.Context()); err != nil || c.Used != 4 {
		t.Errorf("Capacity = %+v, %v; want 4 slots used", c, err)
	}
}

// objectsOf returns "kind/name" of every object in ns labelled with resource id.
func objectsOf(t *testing.T, e *testEnv, id string) []string {
	t.Helper()
	objs, err := e.listOwned(t.Context(), e.cs, e.selector(id))
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = o.String()
	}
	return out
}

// foreign objects: one without Berth's labels, one of another provisioner.
func foreignObjects() []runtime.Object {
	return []runtime.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "unlabelled", Namespace: "ns", Labels: map[string]string{"berth.dev/resource-id": testID}}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "other-provisioner", Namespace: "ns", Labels: map[string]string{
			LabelManagedBy: ManagedBy, LabelProvisioner: "other", LabelResourceID: testID}}},
	}
}

func TestDeprovisionDeletesLabelledObjectsOnly(t *testing.T) {
	e, cs := newTestEnviron(t, testSpec, foreignObjects()...)
	reconcile(t, e, runtimeResource(testID), map[string]any{"slots": 1})
	reconcile(t, e, runtimeResource(otherID), map[string]any{"slots": 1})
	if n := len(objectsOf(t, e, testID)); n != 5 {
		t.Fatalf("%d objects before deprovision, want 5", n)
	}
	// Someone else deletes the service first: not found is success.
	cs.PrependReactor("delete", "services", func(a k8stesting.Action) (bool, runtime.Object, error) {
		name := a.(k8stesting.DeleteAction).GetName()
		if err := cs.Tracker().Delete(schema.GroupVersionResource{Version: "v1", Resource: "services"}, "ns", name); err != nil {
			return true, nil, err
		}
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Resource: "services"}, name)
	})
	if err := e.Deprovision(t.Context(), runtimeResource(testID)); err != nil {
		t.Fatalf("Deprovision: %v", err)
	}
	if left := objectsOf(t, e, testID); len(left) != 0 {
		t.Errorf("left after deprovision: %v", left)
	}
	if n := len(objectsOf(t, e, otherID)); n != 5 {
		t.Errorf("other resource has %d objects, want 5", n)
	}
	if _, err := cs.AppsV1().Deployments("ns").Get(t.Context(), "unlabelled", metaGet); err != nil {
		t.Errorf("unlabelled deployment deleted: %v", err)
	}
	if _, err := cs.CoreV1().Services("ns").Get(t.Context(), "other-provisioner", metaGet); err != nil {
		t.Errorf("other provisioner's service deleted: %v", err)
	}
	if err := e.Deprovision(t.Context(), runtimeResource(testID)); err != nil {
		t.Errorf("second Deprovision: %v", err)
	}
}

// TestDeprovisionDeletesObjectsRecreatedMeanwhile: an object re-created while the
// deprovision waits (by a health check that started before) is deleted on the next round.
func TestDeprovisionDeletesObjectsRecreatedMeanwhile(t *testing.T) {
	e, cs := newTestEnviron(t, testSpec)
	name := "rt-" + testPID
	reconcile(t, e, runtimeResource(testID), map[string]any{"slots": 1})
	svc, err := cs.CoreV1().Services("ns").Get(t.Context(), name, metaGet)
	if err != nil {
		t.Fatal(err)
	}
	// The PVC is held (deleting it only marks it) until the deprovision has waited once; on
	// the look after the wait it is gone and the Service is back.
	cs.PrependReactor("delete", "persistentvolumeclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, nil
	})
	lists := 0
	cs.PrependReactor("list", "persistentvolumeclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
		lists++ // 1: to delete, 2: still there, 3: after the wait
		if lists == 3 {
			if err := cs.Tracker().Delete(schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}, "ns", name); err != nil {
				return true, nil, err
			}
			if err := cs.Tracker().Add(svc); err != nil {
				return true, nil, err
			}
		}
		return false, nil, nil
	})
	done := make(chan error, 1)
	go func() { done <- e.Deprovision(t.Context(), runtimeResource(testID)) }()
	if err := e.clock.WaitAdvance(pollInterval, 5*time.Second, 1); err != nil {
		t.Fatalf("Deprovision did not wait for the PVC to go: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Deprovision: %v", err)
	}
	if left := objectsOf(t, e, testID); len(left) != 0 {
		t.Errorf("left after deprovision: %v", left)
	}
}

func TestDeprovisionWaitsForObjectsToGo(t *testing.T) {
	e, cs := newTestEnviron(t, testSpec)
	reconcile(t, e, runtimeResource(testID), map[string]any{"slots": 1})
	// The PVC is held by a finalizer: deleting only marks it, and it goes only after the
	// deprovision has looked (and waited) once.
	cs.PrependReactor("delete", "persistentvolumeclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, nil
	})
	lists := 0
	cs.PrependReactor("list", "persistentvolumeclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
		lists++ // 1: to delete, 2: still there, 3: after the wait
		if lists == 3 {
			if err := cs.Tracker().Delete(schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}, "ns", "rt-"+testPID); err != nil {
				return true, nil, err
			}
		}
		return false, nil, nil
	})
	done := make(chan error, 1)
	go func() { done <- e.Deprovision(t.Context(), runtimeResource(testID)) }()
	if err := e.clock.WaitAdvance(pollInterval, 5*time.Second, 1); err != nil {
		t.Fatalf("Deprovision did not wait for the PVC to go: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Deprovision: %v", err)
	}
	if lists != 3 {
		t.Errorf("listed PVCs %d times, want 3", lists)
	}
}

func TestCheckSweepsOrphansOnly(t *testing.T) {
	e, cs := newTestEnviron(t, testSpec, foreignObjects()...)
	reconcile(t, e, runtimeResource(testID), map[string]any{"slots": 1})
	reconcile(t, e, runtimeResource(otherID), map[string]any{"slots": 1})
	e.resources.mu.Lock()
	delete(e.resources.ids, otherID) // its row is gone; its objects are orphans
	e.resources.mu.Unlock()

	if err := e.Check(t.Context()); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if left := objectsOf(t, e, otherID); len(left) != 0 {
		t.Errorf("orphans left: %v", left)
	}
	if n := len(objectsOf(t, e, testID)); n != 5 {
		t.Errorf("live resource has %d objects after the sweep, want 5", n)
	}
	if _, err := cs.AppsV1().Deployments("ns").Get(t.Context(), "unlabelled", metaGet); err != nil {
		t.Errorf("unlabelled deployment swept: %v", err)
	}
	if _, err := cs.CoreV1().Services("ns").Get(t.Context(), "other-provisioner", metaGet); err != nil {
		t.Errorf("other provisioner's service swept: %v", err)
	}

	e.resources.mu.Lock()
	e.resources.err = errors.New("database is down")
	e.resources.mu.Unlock()
	if err := e.Check(t.Context()); err == nil || !strings.Contains(err.Error(), "look up resource "+testID+": database is down") {
		t.Errorf("Check with a failing lookup = %v", err)
	}
	if n := len(objectsOf(t, e, testID)); n != 5 {
		t.Errorf("a failed lookup deleted objects: %d left", n)
	}

	cs.PrependReactor("list", "deployments", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	if err := e.Check(t.Context()); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("Check with an unreachable API = %v", err)
	}
}

func setDeploymentAvailable(t *testing.T, cs *fake.Clientset, name string) {
	t.Helper()
	d, err := cs.AppsV1().Deployments("ns").Get(t.Context(), name, metaGet)
	if err != nil {
		t.Fatal(err)
	}
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1, ReadyReplicas: 1}
	if _, err := cs.AppsV1().Deployments("ns").UpdateStatus(t.Context(), d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestCheckResourceRepairsDrift(t *testing.T) {
	e, cs := newTestEnviron(t, testSpec)
	name := "rt-" + testPID
	args := map[string]any{"slots": 1}
	reconcile(t, e, runtimeResource(testID), args)
	setDeploymentAvailable(t, cs, name)
	ctx := t.Context()

	res, err := e.CheckResource(ctx, runtimeResource(testID), &environ.ResourceOptions{Args: args})
	if err != nil || len(res.Repairs) != 0 {
		t.Fatalf("CheckResource of a healthy resource = %v, repairs %v", err, res.Repairs)
	}

	// A Service deleted out of band is re-applied.
	if err := cs.CoreV1().Services("ns").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	res, err = e.CheckResource(ctx, runtimeResource(testID), &environ.ResourceOptions{Args: args})
	if err != nil {
		t.Fatal(err)
	}
	if want := "service " + name + " re-applied: missing (deleted out of band, or never created)"; len(res.Repairs) != 1 || res.Repairs[0] != want {
		t.Errorf("repairs = %q, want [%q]", res.Repairs, want)
	}
	if _, err := cs.CoreV1().Services("ns").Get(ctx, name, metaGet); err != nil {
		t.Errorf("service not re-applied: %v", err)
	}

	// Replicas and image edited out of band are put back.
	d, err := cs.AppsV1().Deployments("ns").Get(ctx, name, metaGet)
	if err != nil {
		t.Fatal(err)
	}
	three := int32(3)
	d.Spec.Replicas = &three
	if _, err := cs.AppsV1().Deployments("ns").Update(ctx, d, metav1.UpdateOptions{FieldManager: "kubectl"}); err != nil {
		t.Fatal(err)
	}
	res, err = e.CheckResource(ctx, runtimeResource(testID), &environ.ResourceOptions{Args: args})
	if err != nil {
		t.Fatal(err)
	}
	if want := "deployment " + name + " re-applied: replicas changed out of band (3, want 1)"; len(res.Repairs) != 1 || res.Repairs[0] != want {
		t.Errorf("repairs = %q, want [%q]", res.Repairs, want)
	}
	if d, _ = cs.AppsV1().Deployments("ns").Get(ctx, name, metaGet); replicas(d.Spec.Replicas) != 1 {
		t.Errorf("replicas not restored: %d", replicas(d.Spec.Replicas))
	}

	// An unavailable deployment is reported with the reason.
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1}
	if _, err := cs.AppsV1().Deployments("ns").UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	res, err = e.CheckResource(ctx, runtimeResource(testID), &environ.ResourceOptions{Args: args})
	if err == nil || !strings.Contains(err.Error(), "0 of 1 replicas available") || res == nil {
		t.Errorf("CheckResource of an unavailable deployment = %v, %v", res, err)
	}
}

// TestCheckResourceLeavesNewerGenerationsAlone: a health check that read the resource
// before its args changed must not put back the objects of the older generation.
func TestCheckResourceLeavesNewerGenerationsAlone(t *testing.T) {
	e, cs := newTestEnviron(t, testSpec)
	name := "rt-" + testPID
	ctx := t.Context()
	if _, err := e.Reconcile(ctx, runtimeResource(testID), &environ.ResourceOptions{Args: map[string]any{"slots": 1}, Generation: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Reconcile(ctx, runtimeResource(testID), &environ.ResourceOptions{Args: map[string]any{"slots": 2}, Generation: 2}); err != nil {
		t.Fatal(err)
	}
	d, err := cs.AppsV1().Deployments("ns").Get(ctx, name, metaGet)
	if err != nil {
		t.Fatal(err)
	}
	if d.Annotations[AnnotationGeneration] != "2" {
		t.Errorf("generation annotation %q, want 2", d.Annotations[AnnotationGeneration])
	}
	applies(cs)
	_, err = e.CheckResource(ctx, runtimeResource(testID), &environ.ResourceOptions{Args: map[string]any{"slots": 1}, Generation: 1})
	if err == nil || !strings.Contains(err.Error(), "generation 2 is being rolled out; the check of generation 1 leaves it alone") {
		t.Errorf("CheckResource of generation 1 = %v", err)
	}
	if got := applies(cs); len(got) != 0 {
		t.Errorf("a check of an older generation applied %v", got)
	}
}

// TestCheckResourceRepairsNothingOnceTheResourceMovedOn: the resource is read again before
// a repair, and a check whose resource changed (new args, deletion requested) repairs
// nothing.
func TestCheckResourceRepairsNothingOnceTheResourceMovedOn(t *testing.T) {
	e, cs := newTestEnviron(t, testSpec)
	name := "rt-" + testPID
	ctx := t.Context()
	opts := &environ.ResourceOptions{Args: map[string]any{"slots": 1}, Generation: 1}
	if _, err := e.Reconcile(ctx, runtimeResource(testID), opts); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Services("ns").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, now := range []domain.Resource{
		{ID: testID, Generation: 2, Status: domain.StatusProvisioning},
		{ID: testID, Generation: 1, Status: domain.StatusDeleting},
	} {
		e.resources.mu.Lock()
		e.resources.moved = map[string]domain.Resource{testID: now}
		e.resources.mu.Unlock()
		applies(cs)
		_, err := e.CheckResource(ctx, runtimeResource(testID), opts)
		if want := fmt.Sprintf("moved on while checked (now %s at generation %d, checked generation 1); nothing repaired", now.Status, now.Generation); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckResource = %v, want %q", err, want)
		}
		if got := applies(cs); len(got) != 0 {
			t.Errorf("applied %v for a resource that moved on", got)
		}
	}
	e.resources.mu.Lock()
	e.resources.moved = map[string]domain.Resource{testID: {ID: testID, Generation: 1, Status: domain.StatusReady}}
	e.resources.mu.Unlock()
	res, err := e.CheckResource(ctx, runtimeResource(testID), opts)
	if err != nil {
		t.Fatalf("CheckResource of the current generation: %v", err)
	}
	if len(res.Repairs) != 1 {
		t.Errorf("CheckResource of the current generation repaired %q, want the service", res.Repairs)
	}
}

// TestConvergeWaitsForObjectsBeingDeleted: applying to an object that is being deleted would
// be lost with it, so both Reconcile and CheckResource fail (to be retried) until it is gone.
func TestConvergeWaitsForObjectsBeingDeleted(t *testing.T) {
	e, cs := newTestEnviron(t, testSpec)
	name := "rt-" + testPID
	ctx := t.Context()
	args := map[string]any{"slots": 1}
	reconcile(t, e, runtimeResource(testID), args)
	svc, err := cs.CoreV1().Services("ns").Get(ctx, name, metaGet)
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	svc.DeletionTimestamp = &now
	if err := cs.Tracker().Update(schema.GroupVersionResource{Version: "v1", Resource: "services"}, svc, "ns"); err != nil {
		t.Fatal(err)
	}
	applies(cs)
	want := "service " + name + " is being deleted; it is re-created once it is gone"
	if _, err := e.Reconcile(ctx, runtimeResource(testID), &environ.ResourceOptions{Args: args}); err == nil || !strings.Contains(err.Error(), want) || environ.IsPermanent(err) {
		t.Errorf("Reconcile = %v, want a transient error saying %q", err, want)
	}
	if _, err := e.CheckResource(ctx, runtimeResource(testID), &environ.ResourceOptions{Args: args}); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("CheckResource = %v, want %q", err, want)
	}
	if got := applies(cs); len(got) != 0 {
		t.Errorf("applied %v while an object was being deleted", got)
	}
}

func TestCheckResourceRollsOutChangedTemplates(t *testing.T) {
	cs := fake.NewClientset()
	old := newTestEnvironWith(t, testSpec, cs, nil)
	args := map[string]any{"slots": 1}
	first := reconcile(t, old, runtimeResource(testID), args)

	// The configuration changes: a slot is now worth two cores.
	changed := newTestEnvironWith(t, `{"host": "http://node-*.localhost", "namespace": "ns", "image": "rilldata/rill", "cpu_per_slot": 2}`, cs, nil)
	res, err := changed.CheckResource(t.Context(), runtimeResource(testID), &environ.ResourceOptions{Args: args})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Repairs) != 5 || !strings.Contains(res.Repairs[0], "template checksum changed") {
		t.Errorf("repairs = %q", res.Repairs)
	}
	d, err := cs.AppsV1().Deployments("ns").Get(t.Context(), "rt-"+testPID, metaGet)
	if err != nil {
		t.Fatal(err)
	}
	if d.Spec.Template.Annotations[AnnotationChecksum] == first.State["checksum"] || d.Spec.Template.Spec.Containers[0].Resources.Requests.Cpu().String() != "2" {
		t.Error("changed templates not rolled out")
	}
}

func TestAwaitReadyWatchesRollout(t *testing.T) {
	e, cs := newTestEnviron(t, testSpec)
	reconcile(t, e, runtimeResource(testID), map[string]any{"slots": 1})
	watching := make(chan struct{}, 10)
	cs.PrependWatchReactor("deployments", func(k8stesting.Action) (bool, watch.Interface, error) {
		watching <- struct{}{}
		return false, nil, nil
	})
	done := make(chan error, 1)
	go func() { done <- e.AwaitReady(t.Context(), runtimeResource(testID)) }()
	<-watching
	select {
	case err := <-done:
		t.Fatalf("AwaitReady returned %v before the rollout", err)
	default:
	}
	setDeploymentAvailable(t, cs, "rt-"+testPID)
	if err := <-done; err != nil {
		t.Fatalf("AwaitReady: %v", err)
	}
}

func TestAwaitReadyTimeoutSaysWhy(t *testing.T) {
	e, cs := newTestEnviron(t, testSpec)
	reconcile(t, e, runtimeResource(testID), map[string]any{"slots": 1})
	labels := e.labels(testID, domain.ResourceTypeRuntime)
	pods := []*corev1.Pod{{
		ObjectMeta: metav1.ObjectMeta{Name: "rt-a", Namespace: "ns", Labels: labels},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
			Message: "0/2 nodes are available: 2 Insufficient cpu."}}},
	}, {
		ObjectMeta: metav1.ObjectMeta{Name: "rt-b", Namespace: "ns", Labels: labels},
		Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
			Name: "runtime", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
				Reason: "ImagePullBackOff", Message: `Back-off pulling image "rilldata/rill:nope"`}}}}},
	}}
	for _, p := range pods {
		if _, err := cs.CoreV1().Pods("ns").Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	watching := make(chan struct{}, 10)
	cs.PrependWatchReactor("deployments", func(k8stesting.Action) (bool, watch.Interface, error) {
		watching <- struct{}{}
		return false, nil, nil
	})
	done := make(chan error, 1)
	go func() { done <- e.AwaitReady(t.Context(), runtimeResource(testID)) }()
	<-watching
	if err := e.clock.WaitAdvance(30*time.Second, 5*time.Second, 1); err != nil {
		t.Fatal(err)
	}
	err := <-done
	for _, want := range []string{
		"runtime " + testID + " not ready within 30s",
		"0 of 1 replicas updated",
		"pod rt-a not scheduled: Unschedulable: 0/2 nodes are available: 2 Insufficient cpu.",
		`pod rt-b container runtime waiting: ImagePullBackOff: Back-off pulling image "rilldata/rill:nope"`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("AwaitReady = %v, want it to say %q", err, want)
		}
	}
}

func TestAwaitReadyHonoursContext(t *testing.T) {
	e, _ := newTestEnviron(t, testSpec)
	reconcile(t, e, runtimeResource(testID), map[string]any{"slots": 1})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := e.AwaitReady(ctx, runtimeResource(testID)); !errors.Is(err, context.Canceled) {
		t.Errorf("AwaitReady with a cancelled context = %v", err)
	}
}

func clickhouseResource(id string) *environ.Resource {
	return &environ.Resource{ID: id, Type: domain.ResourceTypeClickHouse}
}

// wantClickhouseConfig is the config of ClickHouse resource testID: a DSN without password
// and the Secret key holding the password.
func wantClickhouseConfig() map[string]any {
	name := "ch-" + testPID
	return map[string]any{
		"dsn":                       "clickhouse://default@" + name + ".ns.svc:9000/default",
		"password_secret_namespace": "ns",
		"password_secret_name":      name + "-auth",
		"password_secret_key":       "password",
	}
}

func TestClickhouseSecretCreatedOnceAndConfigWithoutPassword(t *testing.T) {
	cs := fake.NewClientset()
	e := newTestEnvironWith(t, testSpec, cs, bytes.Repeat([]byte{0x01}, 24))
	res := reconcile(t, e, clickhouseResource(testID), nil)
	password := strings.Repeat("01", 24)
	name := "ch-" + testPID
	if !reflect.DeepEqual(res.Config, wantClickhouseConfig()) {
		t.Errorf("config = %v, want %v", res.Config, wantClickhouseConfig())
	}
	if res.State["kind"] != "clickhouse" || strings.Contains(fmt.Sprint(res.State), password) || strings.Contains(fmt.Sprint(res.Config), password) {
		t.Errorf("state = %v, config = %v: the password must be in neither", res.State, res.Config)
	}
	ctx := t.Context()
	secret, err := cs.CoreV1().Secrets("ns").Get(ctx, name+"-auth", metaGet)
	if err != nil {
		t.Fatal(err)
	}
	if string(secret.Data["password"]) != password || secret.Labels[LabelResourceID] != testID {
		t.Errorf("secret = %v", secret)
	}
	sts, err := cs.AppsV1().StatefulSets("ns").Get(ctx, name, metaGet)
	if err != nil {
		t.Fatal(err)
	}
	var ref *corev1.SecretKeySelector
	for _, env := range sts.Spec.Template.Spec.Containers[0].Env {
		if env.Name == "CLICKHOUSE_PASSWORD" && env.ValueFrom != nil {
			ref = env.ValueFrom.SecretKeyRef
		}
	}
	if ref == nil || ref.Name != name+"-auth" || ref.Key != "password" || sts.Spec.Template.Spec.Containers[0].Image != DefaultClickhouseImage {
		t.Errorf("statefulset does not take the password from the secret: %+v", sts.Spec.Template.Spec.Containers[0])
	}
	if _, err := cs.CoreV1().PersistentVolumeClaims("ns").Get(ctx, name+"-data", metaGet); err != nil {
		t.Errorf("clickhouse volume: %v", err)
	}

	// Another agent (other randomness) reads the same password back.
	again := newTestEnvironWith(t, testSpec, cs, bytes.Repeat([]byte{0x02}, 24))
	cs.ClearActions()
	res2 := reconcile(t, again, clickhouseResource(testID), nil)
	if !reflect.DeepEqual(res2.Config, wantClickhouseConfig()) {
		t.Errorf("second reconcile's config = %v", res2.Config)
	}
	for _, a := range cs.Actions() {
		if a.GetVerb() == "create" || a.GetVerb() == "patch" {
			t.Errorf("second reconcile did %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
	if secret, err = cs.CoreV1().Secrets("ns").Get(ctx, name+"-auth", metaGet); err != nil || string(secret.Data["password"]) != password {
		t.Errorf("password regenerated: %v %v", secret, err)
	}

	// A failing apply does not leak the password into the error.
	cs.PrependReactor("get", "statefulsets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("etcd is unhappy")
	})
	_, err = again.Reconcile(ctx, clickhouseResource(testID), &environ.ResourceOptions{})
	if err == nil || strings.Contains(err.Error(), password) {
		t.Errorf("Reconcile error = %v", err)
	}
}

// TestClickhouseCheckTakesThePasswordOutOfAnOlderConfig: a resource provisioned when the DSN
// carried the password gets a config without it from its next health check, which keeps the
// Secret's password and applies nothing.
func TestClickhouseCheckTakesThePasswordOutOfAnOlderConfig(t *testing.T) {
	password := "0123456789abcdef0123456789abcdef"
	name := "ch-" + testPID
	// The Secret an older version created, and the config it stored beside it.
	older := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-auth", Namespace: "ns", Labels: map[string]string{
			LabelManagedBy: ManagedBy, LabelResourceID: testID, LabelProvisioner: "k8s", LabelResourceType: "clickhouse",
		}},
		Data: map[string][]byte{"password": []byte(password)},
	}
	e, cs := newTestEnviron(t, testSpec, older)
	reconcile(t, e, clickhouseResource(testID), nil)
	sts, err := cs.AppsV1().StatefulSets("ns").Get(t.Context(), name, metaGet)
	if err != nil {
		t.Fatal(err)
	}
	sts.Status = appsv1.StatefulSetStatus{Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
	if _, err := cs.AppsV1().StatefulSets("ns").UpdateStatus(t.Context(), sts, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	cs.ClearActions()

	stored := clickhouseResource(testID)
	stored.Config = map[string]any{"dsn": "clickhouse://default:" + password + "@" + name + ".ns.svc:9000/default"}
	res, err := e.CheckResource(t.Context(), stored, &environ.ResourceOptions{})
	if err != nil {
		t.Fatalf("CheckResource: %v", err)
	}
	if !reflect.DeepEqual(res.Config, wantClickhouseConfig()) {
		t.Errorf("config after the check = %v, want %v", res.Config, wantClickhouseConfig())
	}
	for _, a := range cs.Actions() {
		if v := a.GetVerb(); v != "get" && v != "list" {
			t.Errorf("the check did %s %s", v, a.GetResource().Resource)
		}
	}
	secret, err := cs.CoreV1().Secrets("ns").Get(t.Context(), name+"-auth", metaGet)
	if err != nil || string(secret.Data["password"]) != password {
		t.Errorf("the secret's password changed: %v %v", secret, err)
	}
}

func TestClickhouseAwaitReady(t *testing.T) {
	e, cs := newTestEnviron(t, testSpec)
	reconcile(t, e, clickhouseResource(testID), nil)
	watching := make(chan struct{}, 10)
	cs.PrependWatchReactor("statefulsets", func(k8stesting.Action) (bool, watch.Interface, error) {
		watching <- struct{}{}
		return false, nil, nil
	})
	done := make(chan error, 1)
	go func() { done <- e.AwaitReady(t.Context(), clickhouseResource(testID)) }()
	<-watching
	sts, err := cs.AppsV1().StatefulSets("ns").Get(t.Context(), "ch-"+testPID, metaGet)
	if err != nil {
		t.Fatal(err)
	}
	sts.Status = appsv1.StatefulSetStatus{Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
	if _, err := cs.AppsV1().StatefulSets("ns").UpdateStatus(t.Context(), sts, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("AwaitReady: %v", err)
	}
}

func node(name string, cpu string, mutate func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	if mutate != nil {
		mutate(n)
	}
	return n
}

func TestCapacityCountsSchedulableCPU(t *testing.T) {
	e, cs := newTestEnviron(t, testSpec,
		node("a", "8", nil),
		node("b", "4", func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }),
		node("cordoned", "16", func(n *corev1.Node) { n.Spec.Unschedulable = true }),
		node("tainted", "16", func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "gpu", Value: "yes", Effect: corev1.TaintEffectNoSchedule}}
		}),
		node("preferred", "2", func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "spot", Effect: corev1.TaintEffectPreferNoSchedule}}
		}),
	)
	labels := e.labels(testID, domain.ResourceTypeRuntime)
	pod := func(name, nodeName, cpu string, l map[string]string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: l},
			Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "c",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}},
		}
	}
	for _, p := range []*corev1.Pod{pod("p1", "a", "1500m", labels), pod("p2", "b", "1", labels), pod("stranger", "a", "4", nil)} {
		if _, err := cs.CoreV1().Pods("ns").Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c, err := e.Capacity(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := environ.Capacity{Unit: "millicpu", Total: 14000, Used: 2500, Hosts: []environ.HostCapacity{
		{Host: "a", Total: 8000, Used: 1500}, {Host: "b", Total: 4000, Used: 1000, Down: true}, {Host: "preferred", Total: 2000},
	}}
	if fmt.Sprint(c) != fmt.Sprint(want) {
		t.Errorf("Capacity = %+v, want %+v", c, want)
	}
}

func TestSlotQuota(t *testing.T) {
	e, _ := newTestEnviron(t, `{"host": "http://node-*.localhost", "namespace": "ns", "image": "rilldata/rill", "slot_quota": 4}`)
	reconcile(t, e, runtimeResource(testID), map[string]any{"slots": 3})
	c, err := e.Capacity(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if c.Unit != "slots" || c.Total != 4 || c.Used != 3 {
		t.Errorf("Capacity = %+v", c)
	}
	_, err = e.Reconcile(t.Context(), runtimeResource(otherID), &environ.ResourceOptions{Args: map[string]any{"slots": 2}})
	if !errors.Is(err, domain.ErrNoCapacity) {
		t.Fatalf("Reconcile over the quota = %v, want ErrNoCapacity", err)
	}
	// Growing within the quota is fine; the resource's own slots do not count against it.
	reconcile(t, e, runtimeResource(testID), map[string]any{"slots": 4})
	// More than the whole quota never fits, however much of it frees: no wait for capacity.
	_, err = e.Reconcile(t.Context(), runtimeResource(otherID), &environ.ResourceOptions{Args: map[string]any{"slots": 5}})
	var nf *domain.NeverFitsError
	if !errors.As(err, &nf) || errors.Is(err, domain.ErrNoCapacity) || nf.Largest != 4 ||
		!strings.Contains(err.Error(), `args.slots: 5 slots can never fit provisioner "k8s": its slot_quota is 4 (raise slot_quota in the provisioner set, or ask for at most 4)`) {
		t.Errorf("Reconcile past the whole quota = %v, want a NeverFitsError naming the quota", err)
	}
}

// finderSet is a resourceSet that also answers MissingResources in one call, counting both.
type finderSet struct {
	*resourceSet
	gets, finds int
}

func (s *finderSet) GetResource(ctx context.Context, id string) (domain.Resource, error) {
	s.gets++
	return s.resourceSet.GetResource(ctx, id)
}

func (s *finderSet) MissingResources(_ context.Context, ids []string) ([]string, error) {
	s.finds++
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, s.err
	}
	var missing []string
	for _, id := range ids {
		if !s.ids[id] {
			missing = append(missing, id)
		}
	}
	return missing, nil
}

func TestCheckSweepLooksUpResourcesInOneQuery(t *testing.T) {
	e, _ := newTestEnviron(t, testSpec)
	reconcile(t, e, runtimeResource(testID), map[string]any{"slots": 1})
	reconcile(t, e, runtimeResource(otherID), map[string]any{"slots": 1})
	finder := &finderSet{resourceSet: e.resources}
	e.kubeEnviron.resources = finder
	finder.mu.Lock()
	delete(finder.ids, otherID)
	finder.mu.Unlock()

	if err := e.Check(t.Context()); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if finder.finds != 1 || finder.gets != 0 {
		t.Fatalf("sweep made %d batched and %d single lookups, want 1 and 0", finder.finds, finder.gets)
	}
	if left := objectsOf(t, e, otherID); len(left) != 0 {
		t.Errorf("orphans left: %v", left)
	}
	if n := len(objectsOf(t, e, testID)); n != 5 {
		t.Errorf("live resource has %d objects after the sweep, want 5", n)
	}

	finder.mu.Lock()
	finder.err = errors.New("database is down")
	finder.mu.Unlock()
	if err := e.Check(t.Context()); err == nil || !strings.Contains(err.Error(), "database is down") {
		t.Errorf("Check with a failing batched lookup = %v", err)
	}
	if n := len(objectsOf(t, e, testID)); n != 5 {
		t.Errorf("a failed batched lookup deleted objects: %d left", n)
	}
}

// roomRecorder is a slot store that records, after each reservation, the room its request
// gives the quota's host once its pick has run: what a store that checks its writes holds
// that host to.
type roomRecorder struct {
	domain.SlotStore
	host  string
	rooms []int
}

func (r *roomRecorder) ReserveSlots(ctx context.Context, req domain.SlotRequest, pick domain.PickHost) (domain.Reservation, error) {
	res, err := r.SlotStore.ReserveSlots(ctx, req, pick)
	r.rooms = append(r.rooms, req.HostSlots(r.host))
	return res, err
}

// The room a reservation's write is checked against on the quota's host leaves out what
// reservations made under an earlier namespace still hold, but for the resource's own, which
// the write moves: every reservation of the provisioner counts against the quota.
func TestSlotQuotaRoomCountsOtherNamespacesReservations(t *testing.T) {
	st := openSlots(t)
	rec := &roomRecorder{SlotStore: st, host: "namespace/ns"}
	e := newTestEnvironOn(t, `{"host": "http://node-*.localhost", "namespace": "ns", "image": "rilldata/rill", "slot_quota": 4}`,
		fake.NewClientset(), bytes.Repeat([]byte{0xab}, 1024), rec, &strings.Builder{})
	onOld := func(domain.SlotRequest, *domain.Reservation, []domain.HostUsage) (string, error) {
		return "namespace/old", nil
	}
	old := domain.SlotRequest{Provisioner: "k8s", ResourceID: otherID, Owner: "o", Slots: 1, HostSlots: func(string) int { return 4 }}
	if _, err := st.ReserveSlots(t.Context(), old, onOld); err != nil {
		t.Fatal(err)
	}
	reconcile(t, e, runtimeResource(testID), map[string]any{"slots": 2})
	reconcile(t, e, runtimeResource(otherID), map[string]any{"slots": 2})
	if want := []int{3, 4}; !slices.Equal(rec.rooms, want) {
		t.Errorf("rooms %v; want %v (the quota less the old namespace's slot, then the whole quota for the runtime that held it)", rec.rooms, want)
	}
	if got := reservedHosts(t, st); !slices.Equal(got, []string{"namespace/ns", "namespace/ns"}) {
		t.Errorf("reservations on %v; want both on the quota's host", got)
	}
}

// reservedHosts returns the host of each of provisioner k8s's reservations.
func reservedHosts(t *testing.T, st domain.SlotStore) []string {
	t.Helper()
	rs, err := st.ListReservations(t.Context(), "k8s")
	if err != nil {
		t.Fatal(err)
	}
	var hosts []string
	for _, r := range rs {
		hosts = append(hosts, r.Host)
	}
	return hosts
}
