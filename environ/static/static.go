package static

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
)

// Type is the provisioner type of the static environ in a provisioner set.
const Type = "static"

// New is the static environ's environ.Initializer: it parses spec and places runtimes through
// deps.Slots.
func New(name string, spec json.RawMessage, deps environ.Deps) (environ.Environ, error) {
	if name == "" {
		return nil, errors.New("static provisioner needs a name")
	}
	if deps.Slots == nil {
		return nil, errors.New("static provisioner needs a slot store to record reservations")
	}
	parsed, err := ParseSpec(spec)
	if err != nil {
		return nil, err
	}
	logger := deps.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &staticEnviron{
		name:   name,
		spec:   parsed,
		place:  placement{provisioner: name, hosts: parsed.Runtimes},
		slots:  deps.Slots,
		logger: logger,
	}, nil
}

// staticEnviron holds nothing mutable: reservations live in the slot store, which serialises
// them per provisioner, so any number of instances (in one agent or several) may share a pool.
type staticEnviron struct {
	name   string
	spec   *Spec
	place  placement
	slots  domain.SlotStore
	logger *slog.Logger
}

// Type implements environ.Environ.
func (e *staticEnviron) Type() string { return Type }

// Supports implements environ.Environ: a static pool only hosts runtimes.
func (e *staticEnviron) Supports(t domain.ResourceType) bool {
	return t == domain.ResourceTypeRuntime
}

// Reconcile implements environ.Environ: it reserves (or resizes) the runtime's slots on a host
// of the pool. The store returns an existing reservation of the same size untouched, which
// makes it idempotent per resource ID.
func (e *staticEnviron) Reconcile(ctx context.Context, r *environ.Resource, opts *environ.ResourceOptions) (*environ.Resource, error) {
	if err := e.supported(r); err != nil {
		return nil, err
	}
	if opts == nil {
		opts = &environ.ResourceOptions{}
	}
	args, err := domain.NewRuntimeArgs(opts.Args)
	if err != nil {
		return nil, fmt.Errorf("runtime %s: %w", r.ID, err)
	}
	res, err := e.slots.ReserveSlots(ctx, domain.SlotRequest{
		Provisioner: e.name,
		ResourceID:  r.ID,
		Owner:       opts.Owner,
		Slots:       args.Slots,
	}, e.place.pick)
	if err != nil {
		return nil, fmt.Errorf("place runtime: %w", err)
	}
	return e.resource(r, res), nil
}

// AwaitReady implements environ.Environ. The pool's runtimes run before they are listed in the
// spec and a reservation only hands out a share of one, so there is nothing to wait for;
// whether a host actually serves is for the pool's health check (Check) to find out.
func (e *staticEnviron) AwaitReady(ctx context.Context, r *environ.Resource) error {
	return ctx.Err()
}

// Deprovision implements environ.Environ: it releases the runtime's slots.
func (e *staticEnviron) Deprovision(ctx context.Context, r *environ.Resource) error {
	if err := e.slots.ReleaseSlots(ctx, e.name, r.ID); err != nil {
		return fmt.Errorf("deprovision runtime: %w", err)
	}
	return nil
}

// Check implements environ.Environ: it reports reservations the configuration no longer
// covers, on hosts that were removed or whose slots were cut below what is reserved.
func (e *staticEnviron) Check(ctx context.Context) error {
	reservations, err := e.slots.ListReservations(ctx, e.name)
	if err != nil {
		return fmt.Errorf("list slot reservations: %w", err)
	}
	type hostUse struct{ slots, resources int }
	use := make(map[string]*hostUse)
	var hosts []string
	for _, res := range reservations {
		u, ok := use[res.Host]
		if !ok {
			u = &hostUse{}
			use[res.Host] = u
			hosts = append(hosts, res.Host)
		}
		u.slots += res.Slots
		u.resources++
	}
	sort.Strings(hosts)
	var problems []string
	for _, host := range hosts {
		u := use[host]
		rt, ok := e.spec.runtime(host)
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("host %s is no longer configured but holds %s of %s",
				host, count(u.slots, "slot"), count(u.resources, "runtime")))
		case u.slots > rt.Slots:
			problems = append(problems, fmt.Sprintf("host %s has %s reserved but only %d configured",
				host, count(u.slots, "slot"), rt.Slots))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("provisioner %q: %s; restore those hosts' slots in the spec, or delete the runtimes placed there",
		e.name, strings.Join(problems, "; "))
}

// CheckResource implements environ.Environ: the runtime's reservation must still exist; a
// missing one is reserved again the way Reconcile does.
func (e *staticEnviron) CheckResource(ctx context.Context, r *environ.Resource, opts *environ.ResourceOptions) (*environ.Resource, error) {
	if err := e.supported(r); err != nil {
		return nil, err
	}
	reservations, err := e.slots.ListReservations(ctx, e.name)
	if err != nil {
		return nil, fmt.Errorf("list slot reservations: %w", err)
	}
	for _, res := range reservations {
		if res.ResourceID == r.ID {
			return e.resource(r, res), nil
		}
	}
	e.logger.Warn("runtime has no slot reservation; reserving again", "resource", r.ID)
	return e.Reconcile(ctx, r, opts)
}

// Close implements environ.Environ; the environ holds no clients of its own.
func (e *staticEnviron) Close() error { return nil }

func (e *staticEnviron) supported(r *environ.Resource) error {
	if !e.Supports(r.Type) {
		return environ.Permanent(fmt.Errorf("provisioner %q is of type %s, which provisions only %s resources, not %s: choose a provisioner that supports %s",
			e.name, Type, domain.ResourceTypeRuntime, r.Type, r.Type))
	}
	return nil
}

// resource returns r with the State and Config of reservation res.
func (e *staticEnviron) resource(r *environ.Resource, res domain.Reservation) *environ.Resource {
	audience := res.Host
	if rt, ok := e.spec.runtime(res.Host); ok {
		audience = rt.AudienceURL
	}
	cfg := domain.RuntimeConfig{
		Host:         res.Host,
		Audience:     audience,
		CPU:          e.spec.CPUPerSlot * res.Slots,
		MemoryGB:     e.spec.MemoryGBPerSlot * res.Slots,
		StorageBytes: e.spec.StorageBytesPerSlot * int64(res.Slots),
	}
	return &environ.Resource{
		ID:     r.ID,
		Type:   r.Type,
		State:  map[string]any{"host": res.Host, "slots": res.Slots},
		Config: cfg.AsMap(),
	}
}
