package kubernetes

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/juju/clock"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/runtime"
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

// clickhousePasswordKey is the key of the password in a ClickHouse resource's Secret.
const clickhousePasswordKey = "password"

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
		logger:          logger,
		clock:           clk,
		resources:       deps.Resources,
		slots:           deps.Slots,
		random:          random,
		cs:              cs,
		closed:          make(chan struct{}),
	}
	if err := e.checkTemplates(); err != nil {
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

	mu     sync.Mutex
	cs     kubernetes.Interface
	closed chan struct{}
	once   sync.Once
}

// Type implements environ.Environ.
func (e *kubeEnviron) Type() string { return Type }

// Supports implements environ.Environ.
func (e *kubeEnviron) Supports(t domain.ResourceType) bool {
	return t == domain.ResourceTypeRuntime || t == domain.ResourceTypeClickHouse
}

// Reconcile implements environ.Environ: it renders the resource's objects and applies them
// unless every object exists with the same checksum and no drift. It always renders the
// resource running, so a hibernated resource is woken: its workload gets its replicas back
// (and its claim, Service and Secret, kept while it was hibernated, are what it runs on).
func (e *kubeEnviron) Reconcile(ctx context.Context, r *environ.Resource, opts *environ.ResourceOptions) (*environ.Resource, error) {
	res, _, err := e.converge(ctx, r, opts, false, false)
	return res, err
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
func (e *kubeEnviron) Hibernate(ctx context.Context, r *environ.Resource, opts *environ.ResourceOptions) (*environ.Resource, error) {
	if !e.Supports(r.Type) {
		return nil, environ.Permanent(fmt.Errorf("provisioner %q cannot provision %s resources", e.name, r.Type))
	}
	cs, err := e.client()
	if err != nil {
		return nil, err
	}
	w := e.workloadOf(cs, r.Type)
	running, _, err := w.list(ctx, e.selector(r.ID))
	if err != nil {
		return nil, fmt.Errorf("hibernate %s %s: list %ss: %w", r.Type, r.ID, w.kind, err)
	}
	if len(running) == 0 {
		if err := e.releaseQuota(ctx, r); err != nil {
			return nil, err
		}
		state := maps.Clone(r.State)
		if state == nil {
			state = map[string]any{}
		}
		state[stateHibernated] = true
		return &environ.Resource{ID: r.ID, Type: r.Type, State: state, Config: r.Config}, nil
	}
	res, _, err := e.converge(ctx, r, opts, false, true)
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
	why, err := w.await(spanCtx, e.selector(r.ID), e.closed, e.clock)
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
	if err := e.releaseQuota(ctx, r); err != nil {
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
func (e *kubeEnviron) CheckResource(ctx context.Context, r *environ.Resource, opts *environ.ResourceOptions) (*environ.Resource, error) {
	asleep := hibernated(r.State)
	res, drift, err := e.converge(ctx, r, opts, true, asleep)
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
	w := e.workloadOf(cs, r.Type)
	ready, why, err := w.status(ctx, e.selector(r.ID))
	if err != nil {
		return res, fmt.Errorf("check %s %s: %w", r.Type, r.ID, err)
	}
	if !ready {
		return res, fmt.Errorf("%s %s is not available: %s", r.Type, r.ID, e.diagnose(ctx, cs, r, why))
	}
	return res, nil
}

// Deprovision implements environ.Environ: it deletes every object labelled with the
// resource's id (foreground, so dependants go first), waits until they are gone, and then
// gives back the runtime's slots of the slot quota. Each deletion is conditional on the
// object as listed, and refused (StaleWriteError) when the object carries a newer lease
// than r.Lease.
func (e *kubeEnviron) Deprovision(ctx context.Context, r *environ.Resource) error {
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
			return e.releaseQuota(ctx, r)
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
				return e.releaseQuota(ctx, r)
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

// Close implements environ.Environ: waits in progress end; the environ owns no informers.
func (e *kubeEnviron) Close() error {
	e.once.Do(func() { close(e.closed) })
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
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("provisioner %q: build Kubernetes client: %w", e.name, err)
	}
	e.cs = cs
	return cs, nil
}

// desired is what a resource's objects should be.
type desired struct {
	resourceType domain.ResourceType
	data         TemplateData
	objects      []*unstructured.Unstructured // in apply order
	checksum     string
	storageBytes int64  // the data volume's size after growth-only adjustment
	notice       string // e.g. a volume not shrunk
	dsn          string // clickhouse only, without the password
	// read holds the live objects rendering already read (a claim, to keep it from
	// shrinking), by kind and name, so that drift does not read them again.
	read map[string]liveObject
	// userLabels are the resource's own labels, under LabelPrefix, on every object.
	userLabels map[string]string
	// asleep says the resource is rendered hibernated: its workload at zero replicas.
	asleep bool
}

// liveObject is what a read of one object found: the object, or that it is missing.
type liveObject struct {
	obj     metav1.Object
	missing bool
}

// objectKey is an object's key in desired.read.
func objectKey(kind, name string) string { return kind + "/" + name }

// converge renders r's objects and applies them if any drifted; it returns the resource and
// the drift it put right. An object being deleted is not applied to (the apply would land on
// the object about to go) but waited for: converge fails until it is gone. checking is true
// for a health check, which must not act for a generation the resource has moved on from;
// asleep renders the resource hibernated (its workload at zero replicas).
func (e *kubeEnviron) converge(ctx context.Context, r *environ.Resource, opts *environ.ResourceOptions, checking, asleep bool) (*environ.Resource, []drift, error) {
	if !e.Supports(r.Type) {
		return nil, nil, environ.Permanent(fmt.Errorf("provisioner %q is of type %s, which provisions %s and %s resources, not %s: choose a provisioner that supports %s",
			e.name, Type, domain.ResourceTypeRuntime, domain.ResourceTypeClickHouse, r.Type, r.Type))
	}
	if opts == nil {
		opts = &environ.ResourceOptions{}
	}
	data, err := e.templateData(r, opts.Args)
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
	d, err := e.desired(ctx, cs, r, data, userLabels, asleep)
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
		if err := e.reserveQuota(ctx, r, opts, data.Slots); err != nil {
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
			if err := e.stillCurrent(ctx, r, opts.Generation); err != nil {
				return nil, nil, err
			}
		}
		if err := e.apply(ctx, cs, r, d, attemptFence(r, opts, newest)); err != nil {
			return nil, nil, fmt.Errorf("%s %s: %w", r.Type, r.ID, err)
		}
	}
	return e.result(r, d), drifts, nil
}

// templateData is what r's templates see, before any lookup in the cluster.
func (e *kubeEnviron) templateData(r *environ.Resource, args map[string]any) (TemplateData, error) {
	pid := strings.ToLower(strings.ReplaceAll(r.ID, "-", ""))
	prefix := "rt-"
	if r.Type == domain.ResourceTypeClickHouse {
		prefix = "ch-"
	}
	name := prefix + pid
	if errs := validation.IsDNS1035Label(name); len(errs) > 0 || validation.IsValidLabelValue(r.ID) != nil {
		return TemplateData{}, fmt.Errorf("resource id %q cannot name Kubernetes objects", r.ID)
	}
	host := strings.ReplaceAll(e.spec.Host, "*", pid)
	u, err := url.Parse(host)
	if err != nil {
		return TemplateData{}, errors.New("host: not a URL once '*' is replaced by the provision id (not shown: it may hold credentials)")
	}
	data := TemplateData{
		Name:        name,
		Namespace:   e.spec.Namespace,
		ResourceID:  r.ID,
		ProvisionID: pid,
		Provisioner: e.name,
		Type:        string(r.Type),
		Host:        host,
		HostName:    u.Hostname(),
		DataDir:     e.spec.DataDir,
		Slots:       1,
	}
	switch r.Type {
	case domain.ResourceTypeRuntime:
		a, err := runtime.DecodeArgs(args)
		if err != nil {
			return TemplateData{}, err
		}
		if most := e.spec.maxSlots(); a.Slots > most.slots {
			return TemplateData{}, &domain.FieldError{Field: "args.slots", Msg: fmt.Sprintf("must be at most %d on provisioner %q, got %d: with %s %d, more slots would overflow the runtime's sizing", most.slots, e.name, a.Slots, most.field, most.perSlot)}
		}
		data.Slots = a.Slots
		if data.Image, err = imageWithTag(e.spec.Image, a.Version); err != nil {
			return TemplateData{}, err
		}
	case domain.ResourceTypeClickHouse:
		if _, err := DecodeClickhouseArgs(args); err != nil {
			return TemplateData{}, err
		}
		data.Image = e.spec.ClickhouseImage
		data.SecretName = name + "-auth"
		data.PasswordKey = clickhousePasswordKey
	}
	// In bounds: data.Slots is at most maxSlots.
	data.CPU = e.spec.CPUPerSlot * data.Slots
	data.MemoryGB = e.spec.MemoryGBPerSlot * data.Slots
	data.Memory = fmt.Sprintf("%dGi", data.MemoryGB)
	data.StorageBytes = e.spec.StorageBytesPerSlot * int64(data.Slots)
	data.Storage = quantity(data.StorageBytes)
	return data, nil
}

var tagPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

// imageWithTag returns image with its tag (or digest) replaced by version; an empty version
// leaves image as the spec gives it.
func imageWithTag(image, version string) (string, error) {
	if version == "" {
		return image, nil
	}
	if !tagPattern.MatchString(version) {
		return "", &domain.FieldError{Field: "args.version", Msg: fmt.Sprintf("%q cannot be an image tag: use letters, digits, '_', '.' and '-' (e.g. 0.48.1)", version)}
	}
	base, _, _ := strings.Cut(image, "@")
	if i := strings.LastIndex(base, ":"); i > strings.LastIndex(base, "/") {
		base = base[:i]
	}
	return base + ":" + version, nil
}

// stillCurrent fails unless resource r is still at generation gen and not being deleted.
// Without a resource lookup (no ResourceGetter) it cannot tell and lets the repair go ahead.
func (e *kubeEnviron) stillCurrent(ctx context.Context, r *environ.Resource, gen int64) error {
	if e.resources == nil {
		return nil
	}
	now, err := e.resources.GetResource(ctx, r.ID)
	if errors.Is(err, domain.ErrNotFound) {
		return fmt.Errorf("%s %s no longer exists; nothing repaired", r.Type, r.ID)
	}
	if err != nil {
		return fmt.Errorf("%s %s: look it up before repairing: %w", r.Type, r.ID, err)
	}
	switch {
	case now.Generation != gen || now.Status == domain.StatusDeleting:
		return fmt.Errorf("%s %s moved on while checked (now %s at generation %d, checked generation %d); nothing repaired (%w)", r.Type, r.ID, now.Status, now.Generation, gen, domain.ErrStale)
	case now.Paused:
		return fmt.Errorf("%s %s was paused while checked; nothing repaired (%w)", r.Type, r.ID, domain.ErrStale)
	case now.Hibernate != hibernated(r.State):
		return fmt.Errorf("%s %s was asked to hibernate or wake while checked; nothing repaired (%w)", r.Type, r.ID, domain.ErrStale)
	}
	return nil
}

// resourceLabels returns the resource's labels as its objects carry them, under LabelPrefix.
// The domain validates labels where clients set them; a row written with SQL may hold a key
// or value Kubernetes refuses, and that is said here rather than by the API server.
func resourceLabels(labels map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(labels))
	for k, v := range labels {
		key := LabelPrefix + k
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			return nil, &domain.FieldError{Field: "labels", Msg: fmt.Sprintf("key %q cannot label Kubernetes objects (%s): relabel the resource", k, strings.Join(errs, "; "))}
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return nil, &domain.FieldError{Field: "labels", Msg: fmt.Sprintf("value %q of %q cannot label Kubernetes objects (%s): relabel the resource", v, k, strings.Join(errs, "; "))}
		}
		out[key] = v
	}
	return out, nil
}

// desired renders r's objects with data, labels them, keeps volumes from shrinking and
// computes their checksum. For ClickHouse it makes sure the password Secret exists.
//
// The resource's own labels (userLabels, already under LabelPrefix) and asleep (its
// workload at zero replicas) are set after the checksum: relabelling a resource, or
// hibernating and waking it, changes only those fields, never the pod template, so neither
// rolls its pods. drift compares them on their own.
func (e *kubeEnviron) desired(ctx context.Context, cs kubernetes.Interface, r *environ.Resource, data TemplateData, userLabels map[string]string, asleep bool) (*desired, error) {
	keys := runtimeTemplates
	var password string
	if r.Type == domain.ResourceTypeClickHouse {
		keys = clickhouseTemplates
		var err error
		if password, err = e.ensureSecret(ctx, cs, r, data, userLabels); err != nil {
			return nil, err
		}
	}
	objects, err := e.templates.render(keys, data, e.spec.Namespace)
	if err != nil {
		return nil, fmt.Errorf("render templates: %w", err)
	}
	sort.SliceStable(objects, func(i, j int) bool { return rankOf(objects[i]) < rankOf(objects[j]) })
	d := &desired{resourceType: r.Type, data: data, objects: objects, storageBytes: data.StorageBytes, read: make(map[string]liveObject), userLabels: userLabels, asleep: asleep}
	labels := e.labels(r.ID, r.Type)
	var notices []string
	for _, obj := range objects {
		obj.SetLabels(merge(obj.GetLabels(), labels))
		switch obj.GetKind() {
		case "Deployment", "StatefulSet":
			podLabels, _, _ := unstructured.NestedStringMap(obj.Object, "spec", "template", "metadata", "labels")
			if err := unstructured.SetNestedStringMap(obj.Object, merge(podLabels, labels), "spec", "template", "metadata", "labels"); err != nil {
				return nil, fmt.Errorf("label %s %s: %w", obj.GetKind(), obj.GetName(), err)
			}
			if obj.GetKind() == "Deployment" && r.Type == domain.ResourceTypeRuntime {
				obj.SetAnnotations(merge(obj.GetAnnotations(), map[string]string{AnnotationSlots: fmt.Sprint(data.Slots)}))
			}
			if password != "" {
				sum := sha256.Sum256([]byte(password))
				if err := setPodAnnotation(obj, AnnotationSecretChecksum, hex.EncodeToString(sum[:8])); err != nil {
					return nil, err
				}
			}
		case "PersistentVolumeClaim":
			kept, notice, live, err := e.growOnly(ctx, cs, obj)
			if err != nil {
				return nil, err
			}
			d.read[objectKey(obj.GetKind(), obj.GetName())] = live
			d.storageBytes = kept
			if notice != "" {
				notices = append(notices, notice)
			}
		}
	}
	d.notice = strings.Join(notices, "; ")
	sum := sha256.New()
	for _, obj := range objects {
		js, err := json.Marshal(obj.Object)
		if err != nil {
			return nil, fmt.Errorf("encode %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
		sum.Write(js)
		sum.Write([]byte("\n"))
	}
	d.checksum = hex.EncodeToString(sum.Sum(nil))
	stamp := map[string]string{AnnotationChecksum: d.checksum}
	for _, obj := range objects {
		obj.SetAnnotations(merge(obj.GetAnnotations(), stamp))
		obj.SetLabels(merge(withoutPrefix(obj.GetLabels(), LabelPrefix), userLabels))
		if k := obj.GetKind(); k == "Deployment" || k == "StatefulSet" {
			// On the pod template too, so that any change of the manifests rolls the pods.
			if err := setPodAnnotation(obj, AnnotationChecksum, d.checksum); err != nil {
				return nil, err
			}
			if asleep {
				if err := unstructured.SetNestedField(obj.Object, int64(0), "spec", "replicas"); err != nil {
					return nil, fmt.Errorf("scale %s %s to zero: %w", k, obj.GetName(), err)
				}
				obj.SetAnnotations(merge(obj.GetAnnotations(), map[string]string{AnnotationHibernated: "true"}))
			}
		}
	}
	if r.Type == domain.ResourceTypeClickHouse {
		d.dsn = clickhouseDSN(objects, e.spec.Namespace)
	}
	return d, nil
}

func setPodAnnotation(obj *unstructured.Unstructured, key, value string) error {
	ann, _, _ := unstructured.NestedStringMap(obj.Object, "spec", "template", "metadata", "annotations")
	if err := unstructured.SetNestedStringMap(obj.Object, merge(ann, map[string]string{key: value}), "spec", "template", "metadata", "annotations"); err != nil {
		return fmt.Errorf("annotate %s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	return nil
}

// growOnly keeps a PVC from shrinking: when the live claim asks for more than obj, obj is set
// to the live size and a notice says so. A claim still pending keeps its size too, because
// only a bound claim can change it. It returns the size obj now asks for and the live claim
// it read.
func (e *kubeEnviron) growOnly(ctx context.Context, cs kubernetes.Interface, obj *unstructured.Unstructured) (int64, string, liveObject, error) {
	want, _, _ := unstructured.NestedFieldNoCopy(obj.Object, "spec", "resources", "requests", "storage")
	wantQ, err := resource.ParseQuantity(fmt.Sprint(want))
	if err != nil {
		return 0, "", liveObject{}, fmt.Errorf("persistentvolumeclaim %s: spec.resources.requests.storage %q is not a quantity", obj.GetName(), fmt.Sprint(want))
	}
	live, err := cs.CoreV1().PersistentVolumeClaims(e.spec.Namespace).Get(ctx, obj.GetName(), metaGet)
	if apierrors.IsNotFound(err) {
		return wantQ.Value(), "", liveObject{missing: true}, nil
	}
	if err != nil {
		return 0, "", liveObject{}, fmt.Errorf("get persistentvolumeclaim %s: %w", obj.GetName(), explainForbidden(err))
	}
	read := liveObject{obj: live}
	liveQ, ok := live.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok || liveQ.Cmp(wantQ) == 0 {
		return wantQ.Value(), "", read, nil
	}
	if liveQ.Cmp(wantQ) < 0 {
		if live.Status.Phase != corev1.ClaimPending {
			return wantQ.Value(), "", read, nil
		}
		// The API refuses to change the size of a claim that is not bound yet (it is bound
		// when its first pod is scheduled). Keeping the live size lets the rest of the
		// resource roll out; the checksum then differs from the grown one, so the first
		// reconcile or health check after binding grows the claim.
		if err := unstructured.SetNestedField(obj.Object, liveQ.String(), "spec", "resources", "requests", "storage"); err != nil {
			return 0, "", liveObject{}, err
		}
		return liveQ.Value(), fmt.Sprintf("volume not grown yet: %s requested, %s kept until the claim is bound (its pod is scheduled)", wantQ.String(), liveQ.String()), read, nil
	}
	if err := unstructured.SetNestedField(obj.Object, liveQ.String(), "spec", "resources", "requests", "storage"); err != nil {
		return 0, "", liveObject{}, err
	}
	return liveQ.Value(), fmt.Sprintf("volume not shrunk: %s requested, %s kept; volumes only grow", wantQ.String(), liveQ.String()), read, nil
}

// result is r with the State and Config of d. Neither carries the ClickHouse password: the
// config names the Secret that holds it. A resource whose stored config still has a DSN with
// the password (written before the DSN lost it) gets this config from its next reconcile
// or health check, which replace the stored one when it differs.
func (e *kubeEnviron) result(r *environ.Resource, d *desired) *environ.Resource {
	state := map[string]any{"provision_id": d.data.ProvisionID, "checksum": d.checksum, "kind": string(d.resourceType)}
	if d.asleep {
		state[stateHibernated] = true
	}
	var cfg map[string]any
	if d.resourceType == domain.ResourceTypeClickHouse {
		cfg = (&ClickhouseConfig{
			DSN:                     d.dsn,
			PasswordSecretNamespace: e.spec.Namespace,
			PasswordSecretName:      d.data.SecretName,
			PasswordSecretKey:       d.data.PasswordKey,
		}).AsMap()
	} else {
		cfg = (&runtime.Config{
			Host:         d.data.Host,
			Audience:     d.data.Host,
			CPU:          d.data.CPU,
			MemoryGB:     d.data.MemoryGB,
			StorageBytes: d.storageBytes,
		}).AsMap()
	}
	return &environ.Resource{ID: r.ID, Type: r.Type, State: state, Config: cfg, Notice: d.notice}
}

// labels are the labels of every object of resource id.
func (e *kubeEnviron) labels(id string, t domain.ResourceType) map[string]string {
	return map[string]string{
		LabelManagedBy:    ManagedBy,
		LabelResourceID:   id,
		LabelProvisioner:  e.name,
		LabelResourceType: string(t),
	}
}

// provisionerSelector selects every object of this provisioner.
func (e *kubeEnviron) provisionerSelector() string {
	return LabelManagedBy + "=" + ManagedBy + "," + LabelProvisioner + "=" + e.name
}

// selector selects the objects of resource id.
func (e *kubeEnviron) selector(id string) string {
	return e.provisionerSelector() + "," + LabelResourceID + "=" + id
}

// withoutPrefix returns m less the keys starting with prefix.
func withoutPrefix(m map[string]string, prefix string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		if !strings.HasPrefix(k, prefix) {
			out[k] = v
		}
	}
	return out
}

func merge(base, over map[string]string) map[string]string {
	out := make(map[string]string, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}

func rankOf(obj *unstructured.Unstructured) int {
	info, _ := kindOf(obj.GetAPIVersion(), obj.GetKind())
	return info.rank
}
