package kubernetes

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/juju/clock"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/internal/budget"
)

// Type is the provisioner type of the kubernetes environ in a provisioner set.
const Type = "kubernetes"

// Labels and annotations on every object Berth creates.
const (
	LabelManagedBy     = "app.kubernetes.io/managed-by"
	ManagedBy          = "berth"
	LabelResourceID    = "berth.dev/resource-id"
	LabelProvisioner   = "berth.dev/provisioner"
	LabelResourceType  = "berth.dev/resource-type"
	AnnotationChecksum = "berth.dev/template-checksum"
	// AnnotationSlots on a runtime's Deployment records its slot count, for people and
	// tools: the slot quota counts the reservations in the database, never this.
	AnnotationSlots = "berth.dev/slots"
	// AnnotationSecretChecksum on a ClickHouse pod template fingerprints its password, so a
	// re-created Secret rolls the server onto the new password.
	AnnotationSecretChecksum = "berth.dev/secret-checksum"
	// AnnotationGeneration records the resource generation an object was last applied for, so
	// that a health check working from an older generation never puts back what a newer one
	// replaced. It is not part of the checksum: a new generation that renders the same objects
	// applies nothing.
	AnnotationGeneration = "berth.dev/generation"
	// AnnotationLeaseToken and AnnotationLeaseHolder record the reconcile lease
	// (domain.Lease) of the attempt that applied an object last. With AnnotationGeneration
	// they fence the cluster's writes: an attempt whose lease token or generation is older
	// than an object's is refused every apply, scale and delete of it (StaleWriteError). A
	// health check, which holds no lease, carries over what the object records.
	AnnotationLeaseToken  = "berth.dev/lease-token"
	AnnotationLeaseHolder = "berth.dev/lease-holder"
	// AnnotationHibernated on a workload says Hibernate scaled it to zero: Check scales such
	// a workload found with replicas back to zero while its resource is hibernated.
	AnnotationHibernated = "berth.dev/hibernated"
	// LabelPrefix starts the key of each of the resource's own labels (domain.Resource
	// Labels) on its objects: label "team" is label.berth.dev/team.
	LabelPrefix = "label.berth.dev/"
)

// Spans of the environ's steps, children of the span of the call that makes them.
const (
	SpanApply         = "kubernetes.apply"
	SpanRolloutWait   = "kubernetes.rollout_wait"
	SpanScaleDownWait = "kubernetes.scale_down_wait"
)

// startSpan starts a child of ctx's span, from the same tracer provider: without a span in
// ctx (traces off, or a caller that traces nothing) it is the no-op span. Only names and
// counts go on the span, never a resource's args, config or secrets.
func startSpan(ctx context.Context, name string, r *environ.Resource, attrs ...attribute.KeyValue) (context.Context, func(error)) {
	tracer := trace.SpanFromContext(ctx).TracerProvider().Tracer("github.com/berth-dev/berth/environ/kubernetes")
	ctx, span := tracer.Start(ctx, name, trace.WithAttributes(append(attrs,
		attribute.String("berth.resource.id", r.ID), attribute.String("berth.resource.type", string(r.Type)))...))
	return ctx, func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

// New is the kubernetes environ's environ.Initializer. It parses the spec and reads and
// test-renders the templates; it does not contact the cluster (the client is built on first
// use), so it can check a configuration on a machine without cluster access.
func New(name string, spec json.RawMessage, deps environ.Deps) (environ.Environ, error) {
	return newEnviron(name, spec, deps, nil, rand.Reader)
}

// newEnviron is New with the client and the randomness for passwords injected; a nil client
// is built from the spec on first use.
func newEnviron(name string, raw json.RawMessage, deps environ.Deps, cs kubernetes.Interface, random io.Reader) (*kubeEnviron, error) {
	if name == "" {
		return nil, errors.New("kubernetes provisioner needs a name")
	}
	if errs := validation.IsValidLabelValue(name); len(errs) > 0 {
		return nil, fmt.Errorf("provisioner name %q cannot label Kubernetes objects (%s): rename the provisioner", name, strings.Join(errs, "; "))
	}
	spec, err := ParseSpec(raw)
	if err != nil {
		return nil, err
	}
	templates, templateDigests, err := loadTemplates(spec.TemplatePaths)
	if err != nil {
		return nil, err
	}
	types, definitions, err := defineTypes(spec.Types, templates, templateDigests)
	if err != nil {
		return nil, err
	}
	// The kubeconfig is read on first use, and may not exist where a configuration is
	// checked; a path that is there but cannot be a kubeconfig is refused now.
	if p := spec.KubeconfigPath; p != "" {
		if err := checkFile(p); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrPermission) {
			return nil, &domain.FieldError{Field: "kubeconfig_path", Msg: fmt.Sprintf("%s %v: give the path of a kubeconfig file", p, err)}
		}
	}
	logger := deps.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	clk := deps.Clock
	if clk == nil {
		clk = clock.WallClock
	}
	e := &kubeEnviron{
		name:            name,
		spec:            spec,
		templates:       templates,
		templateDigests: templateDigests,
		types:           types,
		definitions:     definitions,
		logger:          logger,
		clock:           clk,
		resources:       deps.Resources,
		slots:           deps.Slots,
		random:          random,
		cs:              cs,
		rollouts:        make(map[string]*rollouts),
		closed:          make(chan struct{}),
		floors:          make(map[string]int64),
	}
	if err := e.checkTemplates(); err != nil {
		return nil, err
	}
	if e.budget, err = newBudget(name, spec, deps, clk, logger); err != nil {
		return nil, err
	}
	return e, nil
}

// ResourceSpec implements environ.ResourceSpecReporter: resources are built from the spec and
// from the text of the templates it names, so editing a template file and reloading the set
// rolls the change out to every resource.
func (e *kubeEnviron) ResourceSpec() any {
	return map[string]any{"spec": e.spec, "templates": e.templateDigests}
}

// kubeEnviron keeps no state of its own about resources: the cluster's objects, found by
// their labels, are the truth, so any number of instances may share a namespace.
type kubeEnviron struct {
	name      string
	spec      *Spec
	templates templateSet
	// templateDigests hold a digest of each template's text: part of what resources are built from.
	templateDigests map[string]string
	// types are the types the environ serves: the built-in ones, then those its spec defines.
	types []resourceType
	// definitions are the catalog's definitions of the types the spec defines.
	definitions []*environ.TypeDef
	// tolerations are those of the runtime pod template: nodes with other taints cannot
	// take runtimes and do not count as capacity.
	tolerations []corev1.Toleration
	logger      *slog.Logger
	clock       clock.Clock
	resources   environ.ResourceGetter
	// slots holds the reservations of the slot quota, in the agents' database, so that
	// every agent counts the same slots.
	slots  domain.SlotStore
	random io.Reader
	// budget is the provisioner's shared rate budget, every API request waits for a token
	// of; nil without one (or without a store to share it through, see limitToBudget).
	budget *budget.Limiter

	mu sync.Mutex
	cs kubernetes.Interface
	// rollouts are the caches of the provisioner's workloads, by kind, each run by a
	// goroutine counted in running until closed is.
	rollouts map[string]*rollouts
	running  sync.WaitGroup
	closed   chan struct{}
	once     sync.Once

	// floors are the workload generations the last Reconcile (or Hibernate) of each
	// resource applied or found, for the wait for its rollout that follows (takeFloor).
	floorsMu sync.Mutex
	floors   map[string]int64
}

// Type implements environ.Environ.
func (e *kubeEnviron) Type() string { return Type }

// Summary says in a line where the provisioner's objects go and the types it serves, the
// ones its spec defines included (berth check-config lists it).
func (e *kubeEnviron) Summary() string {
	return fmt.Sprintf("namespace %s; serves %s", e.spec.Namespace, e.servedTypes())
}

// Supports implements environ.Environ.
func (e *kubeEnviron) Supports(t domain.ResourceType) bool {
	_, ok := e.lookupType(t)
	return ok
}

// Reconcile implements environ.Environ: it renders the resource's objects and applies them
// unless every object exists with the same checksum and no drift. It always renders the
// resource running, so a hibernated resource is woken: its workload gets its replicas back
// (and its claim, Service and Secret, kept while it was hibernated, are what it runs on).
func (e *kubeEnviron) Reconcile(ctx context.Context, r *environ.Resource, opts *environ.ResourceOptions) (*environ.Resource, error) {
	t, err := e.typeOf(r)
	if err != nil {
		return nil, err
	}
	res, _, err := e.converge(ctx, r, t, opts, false, false)
	return res, markUnavailable(err)
}

var _ environ.Hibernator = (*kubeEnviron)(nil)

// Hibernate implements environ.Hibernator: it applies the resource's objects with its
// workload (a runtime's Deployment, a ClickHouse StatefulSet) at zero replicas and waits, for
// at most timeout_seconds, until the workload's pods are gone. Everything else is kept as it
// is (the volume claim and its data, the Service, the ClickHouse Secret, the Ingresses), and
// so are the objects' checksums: waking the resource (Reconcile) only gives the workload its
// replicas back. The returned state is marked hibernated, which keeps health checks from
// scaling it up again. A resource without a workload (never provisioned, or its workload
// deleted) runs nothing: nothing is applied, and its state is only marked hibernated.
func (e *kubeEnviron) Hibernate(ctx context.Context, r *environ.Resource, opts *environ.ResourceOptions) (_ *environ.Resource, err error) {
	defer func() { err = markUnavailable(err) }()
	t, err := e.typeOf(r)
	if err != nil {
		return nil, err
	}
	if !t.hibernates {
		return nil, environ.Permanent(fmt.Errorf("provisioner %q cannot hibernate %s resources: wake it (hibernate false) or delete it", e.name, r.Type))
	}
	cs, err := e.client()
	if err != nil {
		return nil, err
	}
	w := e.workloadOf(cs, t)
	running, _, err := w.list(ctx, e.selector(r.ID))
	if err != nil {
		return nil, fmt.Errorf("hibernate %s %s: list %ss: %w", r.Type, r.ID, w.kind, err)
	}
	if len(running) == 0 {
		if err := e.releaseQuota(ctx, r, t); err != nil {
			return nil, err
		}
		state := maps.Clone(r.State)
		if state == nil {
			state = map[string]any{}
		}
		state[stateHibernated] = true
		return &environ.Resource{ID: r.ID, Type: r.Type, State: state, Config: r.Config}, nil
	}
	res, _, err := e.converge(ctx, r, t, opts, false, true)
	if err != nil {
		return nil, err
	}
	timeout := time.Duration(e.spec.TimeoutSeconds) * time.Second
	waitCtx, cancel := context.WithCancelCause(ctx)
	timer := e.clock.AfterFunc(timeout, func() { cancel(errTimeout) })
	defer func() {
		timer.Stop()
		cancel(context.Canceled)
	}()
	// A workload scaled to zero is "ready" once no pod of it is left.
	spanCtx, end := startSpan(waitCtx, SpanScaleDownWait, r, attribute.String("k8s.namespace.name", e.spec.Namespace), attribute.String("berth.kubernetes.kind", w.kind))
	why, err := e.awaitRollout(spanCtx, cs, r.ID, t.workload, w)
	switch {
	case err == nil:
	case context.Cause(waitCtx) == errTimeout && ctx.Err() == nil:
		err = fmt.Errorf("%s %s not scaled down within %s: %s", r.Type, r.ID, timeout, why)
	default:
		err = fmt.Errorf("hibernate %s %s: %w", r.Type, r.ID, err)
	}
	end(err)
	if err != nil {
		return nil, err
	}
	if err := e.releaseQuota(ctx, r, t); err != nil {
		return nil, err
	}
	return res, nil
}

// hibernated reports whether state is that of a hibernated resource.
func hibernated(state map[string]any) bool {
	h, _ := state[stateHibernated].(bool)
	return h
}

// stateHibernated is the key of a hibernated resource's state.
const stateHibernated = "hibernated"

// CheckResource implements environ.Environ: it repairs drift the way Reconcile does, records
// each repair in the returned resource's Repairs, and then reports the workload's health. A
// resource whose workload was just re-applied is not judged until the next check. When the
// workload is unhealthy both the resource (with its State and Repairs) and an error saying
// why are returned.
//
// A check races with the provisioner: the resource's args may change, or its deletion be
// requested, while it runs. So it repairs nothing when an object already carries a newer
// generation, and it reads the resource again just before repairing: if the resource moved
// on (another generation, deleting, gone) the check ends with an error instead.
//
// A hibernated resource (its state says so) is checked as hibernated: drift is repaired
// towards zero replicas, never scaled back up, and its workload is not asked to be available.
//
// An API server that throttles, fails or cannot be reached says nothing of the resource: its
// errors are marked environ.Unavailable, and the health checker records nothing for them.
func (e *kubeEnviron) CheckResource(ctx context.Context, r *environ.Resource, opts *environ.ResourceOptions) (_ *environ.Resource, err error) {
	defer func() { err = markUnavailable(err) }()
	t, err := e.typeOf(r)
	if err != nil {
		return nil, err
	}
	asleep := hibernated(r.State)
	res, drift, err := e.converge(ctx, r, t, opts, true, asleep)
	if err != nil {
		return nil, err
	}
	for _, d := range drift {
		res.Repairs = append(res.Repairs, d.repair())
		e.logger.Info("repaired drift", "resource", r.ID, "repair", d.repair())
	}
	if len(drift) > 0 || asleep {
		return res, nil
	}
	cs, err := e.client()
	if err != nil {
		return nil, err
	}
	w := e.workloadOf(cs, t)
	ready, why, err := w.status(ctx, e.selector(r.ID))
	if err != nil {
		return res, fmt.Errorf("check %s %s: %w", r.Type, r.ID, err)
	}
	if !ready {
		return res, fmt.Errorf("%s %s is not available: %s", r.Type, r.ID, e.diagnose(ctx, cs, r, w, why))
	}
	return res, nil
}

// Deprovision implements environ.Environ: it deletes every object labelled with the
// resource's id (foreground, so dependants go first), waits until they are gone, and then
// gives back the runtime's slots of the slot quota. Each deletion is conditional on the
// object as listed, and refused (StaleWriteError) when the object carries a newer lease
// than r.Lease. The objects of a type the environ does not serve go too: they are found by
// their labels, and such a type holds no slots.
func (e *kubeEnviron) Deprovision(ctx context.Context, r *environ.Resource) (err error) {
	defer func() { err = markUnavailable(err) }()
	e.takeFloor(r.ID) // no rollout of it is awaited any more
	t, _ := e.lookupType(r.Type)
	cs, err := e.client()
	if err != nil {
		return err
	}
	sel := e.selector(r.ID)
	for {
		left, err := e.listOwned(ctx, cs, sel)
		if err != nil {
			return fmt.Errorf("deprovision %s %s: %w", r.Type, r.ID, err)
		}
		if len(left) == 0 {
			return e.releaseQuota(ctx, r, t)
		}
		// Every round deletes what is not already going, not only the first: an object
		// re-created meanwhile (by a health check that began before the deletion was
		// requested) goes too. Most objects go at once, so look again before waiting.
		deleted, err := e.deleteObjects(ctx, cs, left, r)
		if err != nil {
			return fmt.Errorf("deprovision %s %s: %w", r.Type, r.ID, err)
		}
		if deleted > 0 {
			if left, err = e.listOwned(ctx, cs, sel); err != nil {
				return fmt.Errorf("deprovision %s %s: %w", r.Type, r.ID, err)
			}
			if len(left) == 0 {
				return e.releaseQuota(ctx, r, t)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("deprovision %s %s: still waiting for %s to go: %w", r.Type, r.ID, describeOwned(left), ctx.Err())
		case <-e.closed:
			return fmt.Errorf("deprovision %s %s: provisioner closed while waiting for %s to go", r.Type, r.ID, describeOwned(left))
		case <-e.clock.After(pollInterval):
		}
	}
}

// Check implements environ.Environ: listing the namespace proves the API is reachable, and
// every object of this provisioner whose resource no longer exists is deleted. Objects without
// Berth's labels, or of another provisioner, are never touched.
func (e *kubeEnviron) Check(ctx context.Context) error {
	cs, err := e.client()
	if err != nil {
		return err
	}
	owned, err := e.listOwned(ctx, cs, e.provisionerSelector())
	if err != nil {
		return fmt.Errorf("provisioner %q: cannot list objects in namespace %s: %w", e.name, e.spec.Namespace, err)
	}
	if e.resources == nil {
		return nil
	}
	byID := make(map[string][]ownedObject)
	for _, o := range owned {
		if id := o.obj.GetLabels()[LabelResourceID]; id != "" {
			byID[id] = append(byID[id], o)
		}
	}
	ids := make([]string, 0, len(byID))
	for id := range byID {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	missing, problems := e.missingResources(ctx, ids)
	for _, id := range missing {
		e.logger.Info("sweeping objects of a resource that no longer exists", "resource", id, "objects", describeOwned(byID[id]))
		if _, err := e.deleteObjects(ctx, cs, byID[id], nil); err != nil {
			problems = append(problems, fmt.Sprintf("sweep objects of deleted resource %s: %v", id, err))
		}
	}
	problems = append(problems, e.sweepQuota(ctx)...)
	problems = append(problems, e.keepHibernated(ctx, cs, owned)...)
	if len(problems) > 0 {
		return fmt.Errorf("provisioner %q: %s", e.name, strings.Join(problems, "; "))
	}
	return nil
}

// missingResources returns which of ids have no resource row: in one query when the lookup
// can, else one lookup per resource. A lookup that fails is a problem, never a deletion.
func (e *kubeEnviron) missingResources(ctx context.Context, ids []string) ([]string, []string) {
	if finder, ok := e.resources.(environ.MissingResourceFinder); ok {
		missing, err := finder.MissingResources(ctx, ids)
		if err != nil {
			return nil, []string{fmt.Sprintf("look up which of %d resources still exist: %v", len(ids), err)}
		}
		return missing, nil
	}
	var missing, problems []string
	for _, id := range ids {
		_, err := e.resources.GetResource(ctx, id)
		switch {
		case err == nil:
		case errors.Is(err, domain.ErrNotFound):
			missing = append(missing, id)
		default:
			problems = append(problems, fmt.Sprintf("look up resource %s: %v", id, err))
		}
	}
	return missing, problems
}

// Close implements environ.Environ: waits in progress end, and so do the caches of
// workloads (rolloutsOf), which Close waits for.
func (e *kubeEnviron) Close() error {
	e.once.Do(func() {
		e.mu.Lock()
		close(e.closed)
		e.mu.Unlock()
	})
	e.running.Wait()
	return nil
}

// client returns the cluster client, building it on first use.
func (e *kubeEnviron) client() (kubernetes.Interface, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cs != nil {
		return e.cs, nil
	}
	cfg, err := restConfig(e.spec)
	if err != nil {
		return nil, fmt.Errorf("provisioner %q: %w", e.name, err)
	}
	if err := e.limitToBudget(cfg); err != nil {
		return nil, fmt.Errorf("provisioner %q: %w", e.name, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("provisioner %q: build Kubernetes client: %w", e.name, err)
	}
	e.cs = cs
	return cs, nil
}

// converge renders r's objects, of type t, and applies them if any drifted; it returns the
// resource and the drift it put right. An object being deleted is not applied to (the apply
// would land on the object about to go) but waited for: converge fails until it is gone.
// checking is true for a health check, which must not act for a generation the resource has
// moved on from; asleep renders the resource hibernated (its workload at zero replicas).
func (e *kubeEnviron) converge(ctx context.Context, r *environ.Resource, t resourceType, opts *environ.ResourceOptions, checking, asleep bool) (*environ.Resource, []drift, error) {
	if opts == nil {
		opts = &environ.ResourceOptions{}
	}
	data, err := e.templateData(r, t, opts.Args)
	if err != nil {
		return nil, nil, environ.Permanent(fmt.Errorf("%s %s: %w", r.Type, r.ID, err))
	}
	userLabels, err := resourceLabels(opts.Labels)
	if err != nil {
		return nil, nil, environ.Permanent(fmt.Errorf("%s %s: %w", r.Type, r.ID, err))
	}
	cs, err := e.client()
	if err != nil {
		return nil, nil, err
	}
	d, err := e.desired(ctx, cs, r, t, data, userLabels, asleep)
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: %w", r.Type, r.ID, err)
	}
	drifts, newest, err := e.drift(ctx, cs, d)
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: %w", r.Type, r.ID, err)
	}
	if checking && newest.generation > opts.Generation {
		return nil, nil, fmt.Errorf("%s %s: generation %d is being rolled out; the check of generation %d leaves it alone", r.Type, r.ID, newest.generation, opts.Generation)
	}
	if err := staleWrite(r, opts.Generation, newest, "apply"); err != nil {
		return nil, nil, e.refused(err)
	}
	if !checking && !asleep {
		if err := e.reserveQuota(ctx, r, t, opts, data.Slots); err != nil {
			return nil, nil, err
		}
	}
	if len(drifts) > 0 {
		for _, d := range drifts {
			if d.deleting {
				return nil, nil, fmt.Errorf("%s %s: %s %s is being deleted; it is re-created once it is gone", r.Type, r.ID, strings.ToLower(d.kind), d.name)
			}
		}
		if checking {
			if err := environ.StillCurrent(ctx, e.resources, r, opts.Generation, hibernated(r.State)); err != nil {
				return nil, nil, err
			}
		}
		if err := e.apply(ctx, cs, r, d, attemptFence(r, opts, newest)); err != nil {
			return nil, nil, fmt.Errorf("%s %s: %w", r.Type, r.ID, err)
		}
	}
	if !checking {
		e.recordFloor(r, d)
	}
	return e.result(r, d), drifts, nil
}
