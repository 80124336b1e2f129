// Package environ defines the broker contract every provisioner type implements, the
// resource types the brokers serve, and the registry that knows both and builds a named
// provisioner set from its JSON specification.
//
// Brokers stay dumb and idempotent: the provisioner worker owns statuses, retries, backoff and
// ordering. A broker only makes the world match a resource's args, reports what clients need
// to reach it, and lets go of it again.
//
// Resource types belong to the environs that serve them. Each is a TypeDef (its name, a line
// of help, its args for help and --arg parsing, and a Validate that names the field it
// refuses), declared next to the code that reads its args: environ/runtime holds the runtime
// type, which the static and kubernetes environs both serve, and environ/kubernetes the
// clickhouse type. Registry.Register takes a provisioner type with the TypeDefs it serves,
// and the registry's Catalog answers which types are served, by which provisioner types,
// how each one's args are checked and how help lists them: the domain's Service checks
// resources with it (domain.TypeCatalog), the CLI builds its --type help, completion and
// --arg parsing from it, and a Set the registry builds tells the provisioner which types
// its default provisioner starts (ServedTypes) and which type no environ serves
// (CheckType, an *UnknownTypeError). Adding a type to an environ is a TypeDef in that
// environ's package, its name in the environ's Supports, and the code that provisions it;
// nothing in the domain, the schema or the CLI changes.
package environ

import (
	"context"
	"errors"

	"github.com/berth-dev/berth/domain"
)

// Resource is what a broker sees of a resource.
type Resource struct {
	ID   string
	Type domain.ResourceType
	// State is private to the broker; what it returns is saved and handed back next time.
	State map[string]any
	// Config is what clients use to reach the resource.
	Config map[string]any
	// Repairs lists what CheckResource (or Reconcile) found drifted and put right, one line
	// each (e.g. "deployment re-applied: deleted out of band"), for the resource's history.
	Repairs []string
	// Notice is a remark for the resource's status message about a request the environ did
	// not (fully) apply, e.g. a volume it will not shrink. Empty when there is none.
	Notice string
	// Lease is the reconcile lease the caller acts under: the provisioner's, for Reconcile
	// and Deprovision; nil for a caller that holds none (a health check and its repair). A
	// broker that writes to the store passes it with each write (domain.SlotRequest.Lease,
	// ReleaseSlots), so that once another claim fenced the lease none of those writes lands.
	// It is an input only: brokers do not copy it into the Resource they return.
	Lease *domain.Lease
	// Checked is, for a health check (which holds no lease), the row as the check read it:
	// a broker that writes to the store to repair the resource passes it with each write
	// (domain.SlotRequest.Checked), so that no repair lands once the resource moved on (was
	// hibernated, deleted, woken elsewhere) or is gone. Nil otherwise; an input only, as
	// Lease is.
	Checked *domain.Checked
	// Kept says, on the Resource Reconcile returns, that the broker keeps what it returned
	// itself and hands it back on the next Reconcile (the static pool's reservation rows),
	// and that AwaitReady waits briefly if at all. The caller then need not save State
	// before AwaitReady: it records the wait with its next write instead, one write fewer.
	// A broker whose wait can be long leaves it false, so that the wait shows in the
	// resource's status while it lasts.
	Kept bool
}

// ResourceOptions carries the desired state and metadata of a resource.
type ResourceOptions struct {
	Name       string
	Owner      string // resources of one owner are spread across hosts where possible
	Args       map[string]any
	Generation int64
	// Annotations are free-form labels of the owner (e.g. for cluster objects).
	Annotations map[string]string
	// Labels are the resource's labels (domain.Resource.Labels); an environ that labels
	// what it makes puts them under its own prefix.
	Labels map[string]string
}

// Environ provisions resources of one or more types in one place (a static host pool, a
// Kubernetes cluster, ...).
type Environ interface {
	// Type returns the provisioner type (e.g. "static").
	Type() string
	// Supports reports whether the environ can provision resources of type t.
	Supports(t domain.ResourceType) bool
	// Reconcile creates the resource or updates it to match opts.Args, and returns it with its
	// new State and Config. It is idempotent per resource ID: it is called again after an
	// interruption, after every args change and after a restart, and must neither leak nor
	// double-allocate. Errors wrapping domain.ErrNoCapacity mean "wait for room"; errors
	// marked Permanent mean "do not retry until the args change"; any other error is retried.
	Reconcile(ctx context.Context, r *Resource, opts *ResourceOptions) (*Resource, error)
	// AwaitReady blocks until the reconciled resource serves, or ctx ends.
	AwaitReady(ctx context.Context, r *Resource) error
	// Deprovision frees everything the resource holds. A resource that is already gone (or
	// was never provisioned) is a success.
	Deprovision(ctx context.Context, r *Resource) error
	// Check health-checks the environ itself and does its housekeeping (e.g. sweeping what
	// no resource owns any more). ctx carries a generous deadline.
	Check(ctx context.Context) error
	// CheckResource health-checks one ready resource, repairing drift where it can, and returns
	// the resource with the State to save.
	CheckResource(ctx context.Context, r *Resource, opts *ResourceOptions) (*Resource, error)
	// Close releases the environ's clients; it is called when the set is replaced or the
	// agent stops.
	Close() error
}

// Hibernator is implemented by environs that can hibernate a resource: stop it while keeping
// its data and identity, holding as little as they can meanwhile. Waking it is Reconcile:
// the resource's State says what it kept, and Reconcile brings it back (on the host it had,
// where the environ has a choice and room). The provisioner refuses to hibernate resources
// of environs that do not implement it, with a clear error.
type Hibernator interface {
	// Hibernate stops the resource and returns it with the State to save. It is idempotent:
	// a resource already hibernated, or never provisioned, is a success.
	Hibernate(ctx context.Context, r *Resource, opts *ResourceOptions) (*Resource, error)
}

// TypeDefiner is implemented by environs whose spec defines resource types of its own (a
// kubernetes provisioner's "types"). Registry.NewSet adds them to the set's catalog, served
// by the environ's provisioner type, so that the domain checks their args and the
// provisioner claims them as it does for the types registered with the environ.
type TypeDefiner interface {
	// DefinedTypes returns the definitions of the types the spec defines; they must not
	// change while the environ runs.
	DefinedTypes() []*TypeDef
}

// CheckPreparer is implemented by environs that check many resources cheaper together than
// one at a time. The health checker calls PrepareChecks with each page of resources it lists,
// then checks each of them through the PreparedChecks it got, while its provisioner still
// names this environ; other checks go through CheckResource.
type CheckPreparer interface {
	// PrepareChecks reads at once what checking the resources with ids needs. The checker
	// spreads a page's checks over its share of the interval, so the environ decides how
	// long what it read answers for them, and must never repair anything on a read that
	// old without reading again.
	PrepareChecks(ctx context.Context, ids []string) (PreparedChecks, error)
}

// PreparedChecks checks the resources of one PrepareChecks call.
type PreparedChecks interface {
	// CheckResource is Environ.CheckResource; resources PrepareChecks was not given are
	// checked as that would.
	CheckResource(ctx context.Context, r *Resource, opts *ResourceOptions) (*Resource, error)
}

// MissingResourceFinder is implemented by resource lookups (Deps.Resources) that tell in one
// query which of many resources no longer exist; a broker sweeping orphans prefers it to a
// GetResource per resource. Its semantics are domain.OrphanFinder's.
type MissingResourceFinder interface {
	MissingResources(ctx context.Context, ids []string) ([]string, error)
}

// permanentError marks an error that retrying cannot fix.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks err as one that no retry can fix until the resource's args change (for
// example invalid args or an unsupported resource type).
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err, or an error it wraps, was marked Permanent. Argument
// decoding errors (*domain.FieldError) and types no environ serves (*UnknownTypeError) are
// permanent too.
func IsPermanent(err error) bool {
	var p *permanentError
	var f *domain.FieldError
	var u *UnknownTypeError
	return errors.As(err, &p) || errors.As(err, &f) || errors.As(err, &u)
}

// CapacityReporter is implemented by environs that can say how much room they have.
type CapacityReporter interface {
	// Capacity reports the environ's total and used capacity, overall and per host (or
	// node), in the environ's own unit.
	Capacity(ctx context.Context) (Capacity, error)
}

// Capacity is an environ's room, in one unit (e.g. "slots", "millicpu").
type Capacity struct {
	Unit  string
	Total int64
	Used  int64
	Hosts []HostCapacity
}

// HostCapacity is one host's (or node's) share of an environ's capacity.
type HostCapacity struct {
	Host  string
	Total int64
	Used  int64
	// Down is true while the host fails its health checks; new resources avoid it.
	Down bool
}
