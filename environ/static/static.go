package static

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/juju/clock"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/runtime"
)

// Type is the provisioner type of the static environ in a provisioner set.
const Type = "static"

// New is the static environ's environ.Initializer: it parses spec, places runtimes through
// deps.Slots and probes hosts' health with a default HTTP client.
func New(name string, spec json.RawMessage, deps environ.Deps) (environ.Environ, error) {
	return NewWithHTTPClient(defaultHTTPClient)(name, spec, deps)
}

// defaultHTTPClient sends health probes; each probe has its own deadline (the spec's
// health_timeout_seconds), so the client has none.
var defaultHTTPClient = &http.Client{}

// NewWithHTTPClient returns an environ.Initializer like New whose health probes go through
// client.
func NewWithHTTPClient(client HTTPDoer) environ.Initializer {
	return func(name string, spec json.RawMessage, deps environ.Deps) (environ.Environ, error) {
		if name == "" {
			return nil, errors.New("static provisioner needs a name")
		}
		if deps.Slots == nil {
			return nil, errors.New("static provisioner needs a slot store to record reservations")
		}
		if client == nil {
			return nil, errors.New("static provisioner needs an HTTP client for health probes")
		}
		parsed, err := ParseSpec(spec)
		if err != nil {
			return nil, err
		}
		logger := deps.Logger
		if logger == nil {
			logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		}
		clk := deps.Clock
		if clk == nil {
			clk = clock.WallClock
		}
		return &staticEnviron{
			name:      name,
			spec:      parsed,
			place:     newPlacement(name, parsed.Runtimes),
			slots:     deps.Slots,
			resources: deps.Resources,
			health:    newHostHealth(client, clk, parsed.HealthPath, time.Duration(parsed.HealthTimeoutSeconds)*time.Second),
			clock:     clk,
			logger:    logger,
		}, nil
	}
}

// staticEnviron keeps reservations in the slot store, which serialises them per provisioner,
// so any number of instances (in one agent or several) may share a pool. The only state it
// holds itself is each host's latest health probe.
type staticEnviron struct {
	name  string
	spec  *Spec
	place placement
	slots domain.SlotStore
	// resources looks up resource rows for the orphan sweep and before a repair; nil where
	// no database is at hand (check-config).
	resources environ.ResourceGetter
	health    *hostHealth
	clock     clock.Clock
	logger    *slog.Logger
}

// reservationGetter is the slot store's optional single-reservation lookup; without it a
// resource check lists the provisioner's reservations.
type reservationGetter interface {
	GetReservation(ctx context.Context, provisioner, resourceID string) (domain.Reservation, error)
}

// slotSummary is the slot store's optional summary of a pool (domain.SlotSummary): with it
// Check and Capacity read one row per host and the orphans alone, so what they cost does
// not grow with the pool's reservations; without it they list the reservations.
type slotSummary interface {
	ReservedByHost(ctx context.Context, provisioner string) ([]domain.HostReservations, error)
	OrphanedReservations(ctx context.Context, provisioner, after string, limit int) ([]domain.Reservation, error)
}

// orphanPage is how many orphaned reservations Check reads, and releases, at a time.
const orphanPage = 1000

var (
	_ environ.CapacityReporter     = (*staticEnviron)(nil)
	_ environ.ResourceSpecReporter = (*staticEnviron)(nil)
	_ environ.CheckPreparer        = (*staticEnviron)(nil)
	_ environ.Hibernator           = (*staticEnviron)(nil)
	_ environ.InstantProvisioner   = (*staticEnviron)(nil)
)

// Type implements environ.Environ.
func (e *staticEnviron) Type() string { return Type }

// Types are the resource types a static pool serves: it only hosts runtimes.
var Types = []*environ.TypeDef{runtime.Type}

// Supports implements environ.Environ: a static pool serves Types.
func (e *staticEnviron) Supports(t domain.ResourceType) bool {
	return t == runtime.Name
}

// Reconcile implements environ.Environ: it reserves (or resizes) the runtime's slots on a host
// of the pool. The store returns an existing reservation of the same size untouched, which
// makes it idempotent per resource ID.
//
// Hosts never probed are probed first, all at once (bounded by the probe timeout, ended by
// ctx): a host is a candidate only once it has answered. Then it goes straight to the
// store, which reads the resource's current reservation in the reservation's own
// transaction: pick is shown it when the size changes, and when the size is unchanged the
// store hands it back without calling pick. Either way Reconcile learns the reservation the
// runtime had without a read of its own. The placement policy never puts a runtime on a host
// that is not configured, nor an unserved runtime (one without config: no client has it) on
// a host that is down, so a reservation handed back on such a host is moved.
func (e *staticEnviron) Reconcile(ctx context.Context, r *environ.Resource, opts *environ.ResourceOptions) (*environ.Resource, error) {
	opts, args, err := e.runtimeArgs(r, opts)
	if err != nil {
		return nil, err
	}
	hosts := e.hosts()
	if err := e.health.probeUnprobed(ctx, hosts); err != nil {
		return nil, fmt.Errorf("probe the pool's hosts before placing runtime %s: %w", r.ID, err)
	}
	placement := e.place.withDown(e.health.notUp(hosts))
	placement.unserved = len(r.Config) == 0
	// A woken runtime holds no reservation: it goes back to the host it had when that host
	// takes it, so that its clients' host and its data stay where they were.
	woken, previous := hibernatedOn(r.State)
	if woken {
		placement.preferred = canonicalOr(previous)
	}
	req := domain.SlotRequest{Provisioner: e.name, ResourceID: r.ID, Owner: opts.Owner, Slots: args.Slots, Lease: r.Lease, Checked: r.Checked}
	place := e.checkedPick(&req, placement.pick)
	var (
		old    domain.Reservation
		found  bool
		picked bool
	)
	pick := func(req domain.SlotRequest, existing *domain.Reservation, usage []domain.HostUsage) (string, error) {
		picked = true
		if existing != nil {
			old, found = *existing, true
		}
		return place(req, existing, usage)
	}
	res, err := e.slots.ReserveSlots(ctx, req, pick)
	if err == nil && !picked {
		// Handed back unchanged: the runtime already had this reservation.
		old, found = res, true
		if why := placement.leaving(res.Host); why != "" {
			res, err = e.move(ctx, req, old, place, why)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("place runtime: %w", err)
	}
	out, err := e.resource(r, res)
	if err != nil {
		return nil, err
	}
	// The reservation is the runtime's state, and AwaitReady is one probe of its host.
	out.Kept = true
	if found && res.Host != old.Host {
		why := placement.leaving(old.Host)
		out.Notice = fmt.Sprintf("moved from %s, which %s, to %s", old.Host, why, res.Host)
		e.logger.Info("runtime moved off a host that "+why, "resource", r.ID, "from", old.Host, "to", res.Host)
	}
	if woken && previous != "" && !found && res.Host != placement.preferred {
		why := placement.notTaking(placement.preferred)
		if why == "" {
			why = "had no room"
		}
		out.Notice = fmt.Sprintf("woken on %s: %s, its host before hibernating, %s", res.Host, previous, why)
		e.logger.Info("woken runtime placed on another host: its host "+why, "resource", r.ID, "from", previous, "to", res.Host)
	}
	return out, nil
}

// Hibernate implements environ.Hibernator: it releases the runtime's slots under r.Lease and
// keeps in its state the host (and slot count) it had, so that waking it (Reconcile)
// places it there again when that host has room. The environ starts and stops nothing on
// the hosts, so that is all a runtime holds. A runtime hibernated already, or never placed,
// holds nothing to release: that is a success too.
func (e *staticEnviron) Hibernate(ctx context.Context, r *environ.Resource, opts *environ.ResourceOptions) (*environ.Resource, error) {
	if err := e.supported(r); err != nil {
		return nil, err
	}
	if err := e.slots.ReleaseSlots(ctx, e.name, r.ID, r.Lease); err != nil {
		return nil, fmt.Errorf("hibernate runtime: release its slots: %w", err)
	}
	state := map[string]any{stateHibernated: true}
	for _, key := range []string{"host", "slots"} {
		if v, ok := r.State[key]; ok {
			state[key] = v
		}
	}
	return &environ.Resource{ID: r.ID, Type: r.Type, State: state, Config: r.Config}, nil
}

// stateHibernated is the key of a hibernated runtime's state that says it holds no slots.
const stateHibernated = "hibernated"

// hibernatedOn says whether state is that of a hibernated runtime and which host it had
// ("" when it was never placed).
func hibernatedOn(state map[string]any) (bool, string) {
	hibernated, _ := state[stateHibernated].(bool)
	if !hibernated {
		return false, ""
	}
	host, _ := state["host"].(string)
	return true, host
}

// AwaitReady implements environ.Environ. The pool's runtimes run before they are listed in the
// spec and a reservation only hands out a share of one, so what is left to wait for is the
// host: AwaitReady probes the host the runtime was placed on (a result younger than the
// probe cache answers) and fails when it is down, so that the runtime is not reported ready
// on a host that does not answer. The next attempt's Reconcile then places it on a host
// that is up, since no client has it yet.
func (e *staticEnviron) AwaitReady(ctx context.Context, r *environ.Resource) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if host, _ := r.State["host"].(string); host == "" {
		return fmt.Errorf("runtime %s names no host in its state: it was not placed", r.ID)
	}
	_, err := e.probeHost(ctx, r)
	return err
}

// Deprovision implements environ.Environ: it releases the runtime's slots under r.Lease.
func (e *staticEnviron) Deprovision(ctx context.Context, r *environ.Resource) error {
	if err := e.slots.ReleaseSlots(ctx, e.name, r.ID, r.Lease); err != nil {
		return fmt.Errorf("deprovision runtime: %w", err)
	}
	return nil
}

// Check implements environ.Environ: it probes every configured host (so a down host without
// runtimes comes back up too) and reports the hosts that are down, and reservations the
// configuration no longer covers, on hosts that were removed or whose slots were cut below
// what is reserved.
func (e *staticEnviron) Check(ctx context.Context) error {
	hosts := e.hosts()
	failed := e.health.probeAll(ctx, hosts)
	reserved, err := e.sweptReservations(ctx)
	if err != nil {
		return err
	}
	var problems []string
	for _, u := range reserved {
		rt, ok := e.spec.runtime(u.Host)
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("host %s is no longer configured but holds %s of %s",
				u.Host, count(u.Slots, "slot"), count(u.Resources, "runtime")))
		case u.Slots > int64(rt.Slots):
			problems = append(problems, fmt.Sprintf("host %s has %s reserved but only %d configured",
				u.Host, count(u.Slots, "slot"), rt.Slots))
		}
	}
	var parts []string
	if len(problems) > 0 {
		parts = append(parts, strings.Join(problems, "; ")+"; restore those hosts' slots in the spec, or delete the runtimes placed there")
	}
	for _, host := range hosts {
		if err := failed[host]; err != nil {
			parts = append(parts, fmt.Sprintf("host %s is down (%v): new runtimes avoid it until it answers again", host, err))
		}
	}
	if len(parts) == 0 {
		return nil
	}
	return fmt.Errorf("provisioner %q: %s", e.name, strings.Join(parts, "; "))
}

// CheckResource implements environ.Environ: the runtime's reservation must still exist (a
// missing one is reserved again the way Reconcile does, and reported as a repair) and its host
// must answer its health probe. When the probe fails, the error comes with the resource, whose
// state and repairs are still to be saved.
func (e *staticEnviron) CheckResource(ctx context.Context, r *environ.Resource, opts *environ.ResourceOptions) (*environ.Resource, error) {
	if err := e.supported(r); err != nil {
		return nil, err
	}
	if hibernated, _ := hibernatedOn(r.State); hibernated {
		// A hibernated runtime holds no reservation by design: there is nothing to check,
		// and reserving again would undo the hibernate.
		return &environ.Resource{ID: r.ID, Type: r.Type, State: r.State, Config: r.Config}, nil
	}
	res, found, err := e.reservation(ctx, r.ID)
	if err != nil {
		return nil, err
	}
	if found {
		return e.checkReserved(ctx, r, res)
	}
	// A resource deleted while its check ran must not get slots back: that would leak them.
	if err := e.stillWanted(ctx, r.ID); err != nil {
		return nil, err
	}
	e.logger.Warn("runtime has no slot reservation; reserving again", "resource", r.ID)
	out, err := e.Reconcile(ctx, r, opts)
	if err != nil {
		return nil, fmt.Errorf("slot reservation was missing and could not be made again: %w", err)
	}
	out.Repairs = append(out.Repairs, fmt.Sprintf("slot reservation was missing; reserved %v slots on %v again", out.State["slots"], out.State["host"]))
	return e.probeHost(ctx, out)
}

// checkReserved checks runtime r, whose reservation is res.
func (e *staticEnviron) checkReserved(ctx context.Context, r *environ.Resource, res domain.Reservation) (*environ.Resource, error) {
	out, err := e.resource(r, res)
	if err != nil {
		return nil, err
	}
	if host, _ := r.State["host"].(string); host != "" && host != res.Host {
		out.Repairs = append(out.Repairs, fmt.Sprintf("state named host %s; the reservation is on %s", host, res.Host))
	}
	return e.probeHost(ctx, out)
}

// probeHost returns out, with an error when the host its state names fails its health probe.
func (e *staticEnviron) probeHost(ctx context.Context, out *environ.Resource) (*environ.Resource, error) {
	host, _ := out.State["host"].(string)
	if err := e.health.probe(ctx, host); err != nil {
		return out, fmt.Errorf("runtime host %s is down: %w", host, err)
	}
	return out, nil
}

// sweptReservations releases the reservations whose resource row no longer exists (a
// reservation made by a check racing the resource's deletion, or by an agent that died
// between reserving and recording) and returns what the rest hold on each host, by host. A
// resource being deleted keeps its reservation: its deprovision releases it. The sweep holds
// no lease: the store lets a release under none through for a row that is gone. Where no
// resource lookup is at hand nothing is swept.
//
// With a slot store that summarises the pool (slotSummary), the memory this takes does not
// grow with the pool: the store hands over the orphans alone, a page at a time, and one row
// per host.
func (e *staticEnviron) sweptReservations(ctx context.Context) ([]domain.HostReservations, error) {
	summary, ok := e.slots.(slotSummary)
	if !ok {
		reservations, err := e.slots.ListReservations(ctx, e.name)
		if err != nil {
			return nil, fmt.Errorf("list slot reservations: %w", err)
		}
		if reservations, err = e.sweepOrphans(ctx, reservations); err != nil {
			return nil, err
		}
		return sumByHost(reservations), nil
	}
	if e.resources != nil {
		if err := e.releaseOrphans(ctx, summary); err != nil {
			return nil, err
		}
	}
	return e.reservedByHost(ctx)
}

// releaseOrphans releases the pool's orphaned reservations, orphanPage at a time in the order
// of their resource ids, each page after the last id of the one before: the sweep ends
// whatever the releases do, and an orphan made behind it meanwhile is swept by the next.
func (e *staticEnviron) releaseOrphans(ctx context.Context, summary slotSummary) error {
	after := ""
	for {
		orphans, err := summary.OrphanedReservations(ctx, e.name, after, orphanPage)
		if err != nil {
			return fmt.Errorf("find orphaned slot reservations: %w", err)
		}
		for _, res := range orphans {
			if err := e.releaseOrphan(ctx, res); err != nil {
				return err
			}
		}
		if len(orphans) < orphanPage {
			return nil
		}
		after = orphans[len(orphans)-1].ResourceID
	}
}

// sweepOrphans releases those of reservations whose resource row no longer exists and returns
// the rest: sweptReservations for a slot store that only lists.
func (e *staticEnviron) sweepOrphans(ctx context.Context, reservations []domain.Reservation) ([]domain.Reservation, error) {
	if e.resources == nil {
		return reservations, nil
	}
	missing, err := e.missing(ctx, reservations)
	if err != nil {
		return nil, err
	}
	kept := reservations[:0]
	for _, res := range reservations {
		if !missing[res.ResourceID] {
			kept = append(kept, res)
			continue
		}
		if err := e.releaseOrphan(ctx, res); err != nil {
			return nil, err
		}
	}
	return kept, nil
}

// releaseOrphan releases res, whose resource row no longer exists.
func (e *staticEnviron) releaseOrphan(ctx context.Context, res domain.Reservation) error {
	if err := e.slots.ReleaseSlots(ctx, e.name, res.ResourceID, nil); err != nil {
		return fmt.Errorf("release orphaned reservation of resource %s: %w", res.ResourceID, err)
	}
	e.logger.Info("released the slots of a resource that no longer exists",
		"resource", res.ResourceID, "host", res.Host, "slots", res.Slots)
	return nil
}

// sumByHost adds up what reservations hold on each host, by host.
func sumByHost(reservations []domain.Reservation) []domain.HostReservations {
	byHost := make(map[string]*domain.HostReservations)
	var out []domain.HostReservations
	for _, res := range reservations {
		h, ok := byHost[res.Host]
		if !ok {
			out = append(out, domain.HostReservations{Host: res.Host})
			h = &out[len(out)-1]
			byHost[res.Host] = h
		}
		h.Slots += int64(res.Slots)
		h.Resources++
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Host < out[j].Host })
	return out
}

// missing returns the resources of reservations whose row no longer exists: in one query
// where the lookup can, else one lookup per reservation.
func (e *staticEnviron) missing(ctx context.Context, reservations []domain.Reservation) (map[string]bool, error) {
	out := make(map[string]bool)
	if finder, ok := e.resources.(environ.MissingResourceFinder); ok {
		ids := make([]string, len(reservations))
		for i, res := range reservations {
			ids[i] = res.ResourceID
		}
		gone, err := finder.MissingResources(ctx, ids)
		if err != nil {
			return nil, fmt.Errorf("look up the resources of %d reservations: %w", len(ids), err)
		}
		for _, id := range gone {
			out[id] = true
		}
		return out, nil
	}
	for _, res := range reservations {
		_, err := e.resources.GetResource(ctx, res.ResourceID)
		switch {
		case errors.Is(err, domain.ErrNotFound):
			out[res.ResourceID] = true
		case err != nil:
			return nil, fmt.Errorf("look up resource %s of a reservation: %w", res.ResourceID, err)
		}
	}
	return out, nil
}

// stillWanted reports an error unless the resource exists and is not being deleted, paused,
// or hibernated (or asked to be). A resource that moved on so gives an error wrapping
// domain.ErrStale: the check that found it so records nothing.
func (e *staticEnviron) stillWanted(ctx context.Context, id string) error {
	if e.resources == nil {
		return nil
	}
	r, err := e.resources.GetResource(ctx, id)
	if err != nil {
		return fmt.Errorf("slot reservation is missing and the resource cannot be read: %w", err)
	}
	switch {
	case r.Status == domain.StatusDeleting:
		return fmt.Errorf("slot reservation is missing and the resource is being deleted: not reserving again")
	case r.Paused:
		return fmt.Errorf("slot reservation is missing and the resource was paused: not reserving again (%w)", domain.ErrStale)
	case r.Hibernate || r.Status == domain.StatusHibernating || r.Status == domain.StatusHibernated:
		return fmt.Errorf("slot reservation is missing and the resource is hibernating: not reserving again (%w)", domain.ErrStale)
	}
	return nil
}

// Capacity implements environ.CapacityReporter: the slots of every configured host and those
// reserved on it, down hosts marked. Hosts no longer configured that still hold reservations
// are listed with a total of 0.
func (e *staticEnviron) Capacity(ctx context.Context) (environ.Capacity, error) {
	reserved, err := e.reservedByHost(ctx)
	if err != nil {
		return environ.Capacity{}, err
	}
	used := make(map[string]int64)
	var unconfigured []string
	for _, u := range reserved {
		host, err := canonicalURL(u.Host)
		if err != nil {
			host = u.Host
		}
		if _, ok := e.spec.runtime(host); !ok && used[host] == 0 {
			unconfigured = append(unconfigured, host)
		}
		used[host] += u.Slots
	}
	down := e.health.down()
	c := environ.Capacity{Unit: "slots"}
	for _, rt := range e.spec.Runtimes {
		c.Hosts = append(c.Hosts, environ.HostCapacity{
			Host: rt.Host, Total: int64(rt.Slots), Used: used[rt.Host], Down: containsString(down, rt.Host),
		})
	}
	sort.Strings(unconfigured)
	for _, host := range unconfigured {
		c.Hosts = append(c.Hosts, environ.HostCapacity{Host: host, Used: used[host]})
	}
	for _, h := range c.Hosts {
		c.Total += h.Total
		c.Used += h.Used
	}
	return c, nil
}

// reservedByHost returns what the pool's reservations hold on each host, by host: one row per
// host from a slot store that summarises the pool, else the sum of its listed reservations.
func (e *staticEnviron) reservedByHost(ctx context.Context) ([]domain.HostReservations, error) {
	if summary, ok := e.slots.(slotSummary); ok {
		reserved, err := summary.ReservedByHost(ctx, e.name)
		if err != nil {
			return nil, fmt.Errorf("read slot reservations by host: %w", err)
		}
		return reserved, nil
	}
	reservations, err := e.slots.ListReservations(ctx, e.name)
	if err != nil {
		return nil, fmt.Errorf("list slot reservations: %w", err)
	}
	return sumByHost(reservations), nil
}

// reservation returns the resource's reservation, if it has one.
func (e *staticEnviron) reservation(ctx context.Context, id string) (domain.Reservation, bool, error) {
	if getter, ok := e.slots.(reservationGetter); ok {
		res, err := getter.GetReservation(ctx, e.name, id)
		switch {
		case errors.Is(err, domain.ErrNotFound):
			return res, false, nil
		case err != nil:
			return res, false, fmt.Errorf("read slot reservation: %w", err)
		}
		return res, true, nil
	}
	reservations, err := e.slots.ListReservations(ctx, e.name)
	if err != nil {
		return domain.Reservation{}, false, fmt.Errorf("list slot reservations: %w", err)
	}
	for _, res := range reservations {
		if res.ResourceID == id {
			return res, true, nil
		}
	}
	return domain.Reservation{}, false, nil
}

// ResourceSpec implements environ.ResourceSpecReporter: a runtime is shaped by its host's
// entry and the per-slot sizing, while health probing shapes none, so a change of
// health_path or health_timeout_seconds alone reconciles no runtime.
func (e *staticEnviron) ResourceSpec() any {
	return struct {
		Runtimes            []Runtime `json:"runtimes"`
		CPUPerSlot          int       `json:"cpu_per_slot"`
		MemoryGBPerSlot     int       `json:"memory_gb_per_slot"`
		StorageBytesPerSlot int64     `json:"storage_bytes_per_slot"`
	}{e.spec.Runtimes, e.spec.CPUPerSlot, e.spec.MemoryGBPerSlot, e.spec.StorageBytesPerSlot}
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

// runtimeArgs checks that r is a runtime and returns opts (empty options for nil) with its
// decoded args.
func (e *staticEnviron) runtimeArgs(r *environ.Resource, opts *environ.ResourceOptions) (*environ.ResourceOptions, *runtime.Args, error) {
	if err := e.supported(r); err != nil {
		return nil, nil, err
	}
	if opts == nil {
		opts = &environ.ResourceOptions{}
	}
	args, err := runtime.DecodeArgs(opts.Args)
	if err != nil {
		return nil, nil, fmt.Errorf("runtime %s: %w", r.ID, err)
	}
	return opts, args, nil
}

// hosts returns the configured hosts, in config order.
func (e *staticEnviron) hosts() []string {
	hosts := make([]string, len(e.spec.Runtimes))
	for i, rt := range e.spec.Runtimes {
		hosts[i] = rt.Host
	}
	return hosts
}

// resource returns r with the State and Config of reservation res. The per-slot sizes are
// multiplied with overflow checks: ParseSpec refuses sizing that overflows on its largest
// host, but a reservation made before the spec changed may be larger, and its error names
// the sizing to lower rather than handing clients a negative size.
func (e *staticEnviron) resource(r *environ.Resource, res domain.Reservation) (*environ.Resource, error) {
	audience := res.Host
	if rt, ok := e.spec.runtime(res.Host); ok {
		audience = rt.AudienceURL
	}
	cpu, err := runtime.SlotSize("cpu_per_slot", int64(e.spec.CPUPerSlot), res.Slots)
	if err != nil {
		return nil, environ.Permanent(fmt.Errorf("runtime %s: %w", r.ID, err))
	}
	memory, err := runtime.SlotSize("memory_gb_per_slot", int64(e.spec.MemoryGBPerSlot), res.Slots)
	if err != nil {
		return nil, environ.Permanent(fmt.Errorf("runtime %s: %w", r.ID, err))
	}
	storage, err := runtime.SlotSize("storage_bytes_per_slot", e.spec.StorageBytesPerSlot, res.Slots)
	if err != nil {
		return nil, environ.Permanent(fmt.Errorf("runtime %s: %w", r.ID, err))
	}
	cfg := runtime.Config{Host: res.Host, Audience: audience, CPU: int(cpu), MemoryGB: int(memory), StorageBytes: storage}
	return &environ.Resource{
		ID:     r.ID,
		Type:   r.Type,
		State:  map[string]any{"host": res.Host, "slots": res.Slots},
		Config: cfg.AsMap(),
	}, nil
}
