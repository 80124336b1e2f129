package domain

import (
	"context"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/labels"
)

// State is the storage contract every backend (PostgreSQL, and the embedded SQLite store)
// implements; domain/statetest is the suite that checks a backend meets it. Consumers
// declare the few methods they use as their own small interfaces.
type State interface {
	ResourceStore
	OrphanFinder
	ReconcileStore
	ChangeLog
	SlotStore
	ReservationReader
	SlotSummary
	HealthStore
	EventLog
	CapacityStore
	ProvisionerSpecStore
	AgentStore
	LeadershipStore
	SchemaStore
	QuotaStore
	BudgetStore
	BreakerStore
	OwnerStore
	// Close releases the backend's connections.
	Close()
}

// NewResource is what a client supplies to create a resource.
type NewResource struct {
	Type        ResourceType
	Name        string
	Owner       string
	Provisioner string // empty: the agent pins its default provisioner on first reconcile
	Args        map[string]any
	Labels      map[string]string
}

// ListFilter narrows ListResources; zero fields match everything.
type ListFilter struct {
	Owner       string
	Type        ResourceType
	Provisioner string
	Status      Status
	// Selector keeps the resources whose labels it matches (nil: all); see ParseSelector.
	Selector labels.Selector
	Limit    int // 0: no limit
}

// ResourceStore is the client side of the resources table: what the CLI and Go API use.
type ResourceStore interface {
	// CreateResource inserts a pending resource at generation 1. A resource with the same
	// owner, type and (case-insensitive) name gives ErrAlreadyExists.
	CreateResource(ctx context.Context, r NewResource) (Resource, error)
	// GetResource returns the resource or ErrNotFound.
	GetResource(ctx context.Context, id string) (Resource, error)
	// ListResources returns resources ordered by creation time, oldest first.
	ListResources(ctx context.Context, f ListFilter) ([]Resource, error)
	// UpdateResourceArgs replaces the desired args; generation is bumped when they differ.
	// A resource being deleted gives ErrStale.
	UpdateResourceArgs(ctx context.Context, id string, args map[string]any) (Resource, error)
	// RequestDelete moves the resource to deleting (idempotent); the agent deprovisions it
	// and then removes the row.
	RequestDelete(ctx context.Context, id string) (Resource, error)
	// SetPaused pauses (true) or resumes (false) the resource and returns it; setting what
	// it already has changes nothing and records nothing. Either is recorded as a control
	// event and logged as a change, so the agent resumes a resource at once.
	SetPaused(ctx context.Context, id string, paused bool) (Resource, error)
	// SetHibernate asks for the resource to be hibernated (true) or woken (false) and
	// returns it, recorded and logged as SetPaused is; setting what it already has changes
	// nothing. A change resets the retry bookkeeping. A resource being deleted gives an
	// error wrapping ErrConflict.
	SetHibernate(ctx context.Context, id string, hibernate bool) (Resource, error)
	// RequestRetry clears the resource's backoff and permanent failure (attempts,
	// next_attempt_at, last_error), stamps RetryRequestedAt, and logs a change so an agent
	// reconciles it at once; it is recorded as a control event.
	RequestRetry(ctx context.Context, id string) (Resource, error)
	// SetLabels replaces the resource's labels and returns it. A change bumps the
	// generation (the Kubernetes environ labels its objects) and is recorded as a control
	// event; the same labels again change nothing.
	SetLabels(ctx context.Context, id string, labels map[string]string) (Resource, error)
	// ChangeLabels sets the labels in set and removes the keys in remove, in one write that
	// merges them into the labels the row has when it is written, so that concurrent
	// changes of different keys all land; it returns the resource. It is recorded as
	// SetLabels is, and the same labels again change nothing. Removing a key the resource
	// does not have, or ending with more than MaxLabels, gives a FieldError and changes
	// nothing (see MergeLabels); a resource being deleted gives an error wrapping ErrConflict.
	ChangeLabels(ctx context.Context, id string, set map[string]string, remove []string) (Resource, error)
	// ForgetResource removes the resource's row without deprovisioning it, whatever its
	// status, and returns the row as it was. In the same transaction it records an
	// EventControl event (ForgetMessage: who, why, and what the provisioner may have left
	// behind) before the removal's own. A resource whose lease a live agent holds (it may be
	// provisioning or deprovisioning it this moment) gives a *LeaseHeldError and is kept:
	// forgetting it then could leave behind what that agent makes after. On PostgreSQL only
	// the agent's role (the tables' owner) may forget: a client role gets ErrForbidden.
	ForgetResource(ctx context.Context, id string, f Forgetting) (Resource, error)
	// SetProvisioner moves the resource to the named provisioner and returns it. The move
	// clears its retry bookkeeping and permanent failure (as RequestRetry does) and logs a
	// change, so an agent reconciles it on the new provisioner at once. It is refused with
	// an error wrapping ErrConflict once something may have been provisioned for it (it
	// left pending or error, was ever ready, or has state) and while it is being deleted:
	// the old provisioner's things would leak.
	SetProvisioner(ctx context.Context, id, provisioner string) (Resource, error)
}

// OrphanFinder tells brokers which of the things they hold belong to resources that no longer
// exist, for many resources in one go.
type OrphanFinder interface {
	// MissingResources returns the ids among ids that name no resource row (ids that are not
	// UUIDs name none), as given and in the order given. A row being deleted still exists: it
	// is not missing until FinalizeDelete removes it.
	MissingResources(ctx context.Context, ids []string) ([]string, error)
}

// Attention is a resource the agent has work to do on, and the earliest time to do it.
type Attention struct {
	ID        string
	Owner     string
	NotBefore *time.Time // nil: now
}

// ProgressUpdate is what the agent records after (a step of) a reconcile.
type ProgressUpdate struct {
	// Generation is the generation the reconcile worked on. The update applies only while the
	// row is still at that generation and not being deleted (unless Status is StatusDeleting);
	// otherwise it gives ErrStale.
	Generation int64

	Status Status
	// Reason is Status's reason. The store sets WaitingSince when it becomes
	// ReasonWaitingForCapacity (kept while it stays so, cleared otherwise) and LastAttemptAt
	// on every update, both on the database clock.
	Reason        Reason
	StatusMessage string

	Provisioner        string         // non-empty: pin the resource to this provisioner
	State              map[string]any // non-nil: replace the environ state
	Config             map[string]any // non-nil: replace the client config
	ObservedGeneration *int64         // non-nil: record this generation as observed

	Attempts int
	// RetryIn, when positive, schedules the next attempt that long after the write, on the
	// database clock (the row's NextAttemptAt): every agent compares it with that clock, so
	// an agent whose own clock is off neither skips another's backoff nor makes others skip
	// its own. Zero (or less): no retry scheduled.
	RetryIn   time.Duration
	LastError string

	// ReleaseLease gives up holder's lease in the same write, as ReleaseResource would after
	// it: for the last record of an attempt. When the update is refused the lease is kept.
	ReleaseLease bool

	// Admission, when non-nil, records the resource admitted at Admission.Units on
	// Admission.Provisioner in the same write: the deferred admission of an owner without
	// a quota there (QuotaStore.AdmitResource with Admission.Defer).
	Admission *Admission

	// Passed is a step the attempt went through without a write of its own, having nothing
	// it had to save first (nil: none). The update adds it to the resource's history, as a
	// status event, just before its own status event and in the same write; a refused
	// update records neither.
	Passed *StatusStep
}

// StatusStep is a status and message a resource went through.
type StatusStep struct {
	Status  Status
	Reason  Reason
	Message string
}

// ReconcileStore is the agent side of the resources table.
type ReconcileStore interface {
	// ResourcesNeedingAttention lists, a page at a time, resources whose status or
	// generation says the agent has work to do: pending, provisioning, deleting, error
	// (re-evaluated at start), and ready ones whose generation is ahead of
	// observed_generation. A page is the first limit such resources in id order whose ids
	// are greater than afterID ("": from the start); the next page starts after its last.
	ResourcesNeedingAttention(ctx context.Context, afterID string, limit int) ([]Attention, error)
	// ClaimResource takes (or renews) the resource's reconcile lease for holder and returns the
	// row with the lease it now holds. It gives ErrNotFound when the row is gone and an error
	// wrapping ErrLeaseHeld (with LeaseHeldError's expiry) while another holder's lease is
	// live. Claiming one's own lease again succeeds, so an agent restarted under the same
	// identity resumes at once. A lease whose holder is a registered agent (see AgentStore)
	// is live only while that agent is: it is void once the agent misses its heartbeats,
	// whatever its expiry says.
	//
	// Every successful claim, a renewal by the same holder included, bumps the row's lease
	// token (heartbeats renew a lease without bumping it): the writes guarded by a Lease
	// are refused once another claim was made, so an attempt that paused past its lease,
	// or a second process of the same holder, cannot write over the attempt that took the
	// resource on. A claim that took the lease from another holder reports it in
	// Claim.Takeover.
	ClaimResource(ctx context.Context, id, holder string, ttl time.Duration) (Claim, error)
	// ClaimAndStart is ClaimResource that, in the same write, also records the start of
	// provisioning of a resource nothing has been done to since it was created (or since its
	// args changed while it was pending): when the claimed row is pending with an empty
	// status message and no retry scheduled, names start.Provisioner or no provisioner, and
	// is of one of start.Types, its status becomes provisioning with the message
	// ProvisioningMessage(generation) and start.Provisioner is pinned; attempts and
	// last_error are kept. That is the RecordProgress the agent makes when it starts
	// provisioning such a row, and it is recorded the same way (history included).
	// Claim.Started says whether it was; otherwise the row is only claimed.
	ClaimAndStart(ctx context.Context, id, holder string, ttl time.Duration, start ProvisioningStart) (Claim, error)
	// UnclaimedResources returns those of ids (ids that are not UUIDs name none) that need
	// attention (see ResourcesNeedingAttention), are due (no retry scheduled for later) and
	// whose lease no live holder has, in the order given: of the resources another agent was
	// left to reconcile first, those it has not taken up.
	UnclaimedResources(ctx context.Context, ids []string) ([]string, error)
	// ReleaseResource gives up lease (no-op when it is not the row's lease any more).
	ReleaseResource(ctx context.Context, id string, lease Lease) error
	// HandOverResource is ReleaseResource that, when the lease was held, also logs a change
	// of the resource in the same write, so the other agents' watchers take it over at once:
	// what an agent that stops mid-attempt does, since those agents found the lease held
	// and would otherwise look again only when it would have ended.
	HandOverResource(ctx context.Context, id string, lease Lease) error
	// RecordProgress applies u while lease is the row's live lease and returns the new row
	// (and releases the lease when u.ReleaseLease says so). A lease that is no longer the
	// row's (another claim was made since) gives an error wrapping ErrLeaseHeld naming the
	// current holder, whatever else changed.
	RecordProgress(ctx context.Context, id string, lease Lease, u ProgressUpdate) (Resource, error)
	// FinalizeDelete removes a deleting resource's row once its environ has let go of it,
	// while lease is the row's live lease (else an error wrapping ErrLeaseHeld).
	FinalizeDelete(ctx context.Context, id string, lease Lease) error
}

// Lease is a resource's reconcile lease as one claim took it: the holder, and the token the
// row's lease_token had after that claim. The writes of an attempt carry it and apply only
// while the row still has both, so a claim made since (by another agent taking over, or by
// another process of the same holder) fences every write of the earlier one.
type Lease struct {
	Holder string
	Token  int64
}

// Claim is what a claim of a resource's lease returns.
type Claim struct {
	Resource Resource // the row as claimed
	Lease    Lease    // the lease the claim holds: what the attempt's writes carry
	// Started says ClaimAndStart recorded the start of provisioning.
	Started bool
	// Takeover is set when the claim took the lease from another holder whose lease had
	// expired or whose agent was no longer live; nil when the lease was free or the
	// claimer's own.
	Takeover *Takeover
	// Admission is what the claim read of the row's quota admission under its lock: when it
	// says enough, the attempt needs no admission statement of its own (AdmitResource).
	Admission ClaimedAdmission
}

// ClaimedAdmission is a claimed row's quota admission and whether its owner had any quota,
// as the claim read them. Its zero value tells nothing: not admitted, quotas unknown.
type ClaimedAdmission struct {
	Provisioner string // the provisioner the row is admitted on; "" when it is not admitted
	Units       int64  // the units it is admitted at there
	// NoQuota says the owner had no quota on any provisioner: an admission there needs no
	// check, and the attempt's next progress write records it (Admission.Defer).
	NoQuota bool
}

// Takeover is a claim of a lease that another holder still named but no longer held.
type Takeover struct {
	PreviousHolder string
	// Waited is how long the resource's work had waited, on the database clock: since the
	// previous holder's last heartbeat, or since its lease expired when that came first
	// (or it is not a registered agent).
	Waited time.Duration
}

// ProvisioningStart says which claimed resources ClaimAndStart starts provisioning: those the
// agent's default provisioner provisions.
type ProvisioningStart struct {
	Provisioner string         // the default provisioner's name, pinned on a row naming none; required
	Types       []ResourceType // the resource types it provisions
}

// ProvisioningMessagePrefix starts the status message of a resource whose provisioning
// started; the generation follows (ProvisioningMessage).
const ProvisioningMessagePrefix = "provisioning generation "

// ProvisioningMessage is the status message of a resource whose provisioning at generation
// started.
func ProvisioningMessage(generation int64) string {
	return ProvisioningMessagePrefix + strconv.FormatInt(generation, 10)
}

// LeaseHeldError says who holds a resource's lease and until when. It is also the error of a
// write whose Lease is no longer the row's: Holder is then whoever holds the lease now ("" when
// nobody does).
type LeaseHeldError struct {
	Holder string
	// ExpiresAt is the earlier of the lease's expiry and, when the holder is a registered
	// agent, the time that agent stops being live unless it heartbeats again.
	ExpiresAt time.Time
	// LiveAgent says the holder is a registered agent that is live: the resource is that
	// agent's work. Should it die, or let go of the resource with a retry it does not come
	// back for, the agents' watchers hand it on (ResourcesOfDeadAgents, OverdueResources).
	LiveAgent bool
}

func (e *LeaseHeldError) Error() string {
	if e.Holder == "" {
		return "the resource's lease was given up or taken over since it was claimed; nobody holds it now"
	}
	return ErrLeaseHeld.Error() + " (" + e.Holder + ", lease expires " + e.ExpiresAt.UTC().Format(time.RFC3339) + ")"
}

// Unwrap makes errors.Is(err, ErrLeaseHeld) true.
func (e *LeaseHeldError) Unwrap() error { return ErrLeaseHeld }

// Change is one entry of the durable change log: a resource whose desired state (args,
// provisioner, a delete request, or the row itself) changed.
type Change struct {
	Seq        int64
	ResourceID string
	// Owner is the resource's owner as the write the entry records left it (a removal's:
	// the removed row's), for the fair queues. An entry written without one (before the
	// log carried owners) gives the resource's owner as the entry is read, "" once the row
	// is removed.
	Owner string
}

// NewestChange is a change-log entry read ahead of a reader's cursor (NewestChanges).
type NewestChange struct {
	Change
	// OwnerFirst says no entry of the owner lies between the reader's cursor and the
	// entries read: handed on now, it is served in its owner's change order.
	OwnerFirst bool
}

// ChangeLog is the durable record watchers tail. Entries are written by the backend itself
// (triggers), so writes made directly against the table are seen as well.
type ChangeLog interface {
	// LatestChangeSeq returns the highest sequence number in the log (0 when empty).
	LatestChangeSeq(ctx context.Context) (int64, error)
	// ChangesAfter returns up to limit entries with Seq > after, in Seq order.
	ChangesAfter(ctx context.Context, after int64, limit int) ([]Change, error)
	// ChangesIn returns the entries among seqs that exist (committed) now.
	ChangesIn(ctx context.Context, seqs []int64) ([]Change, error)
	// NewestChanges returns the newest up to limit entries with Seq > after, in Seq order,
	// each with OwnerFirst set when no entry of its owner lies between cursor and the
	// oldest of them, and that oldest is at most reach entries past cursor (cursor <=
	// after): a reader whose cursor is at cursor may hand those on before it reads up to
	// them and still serve each owner in change order.
	NewestChanges(ctx context.Context, cursor, after int64, limit, reach int) ([]NewestChange, error)
	// PruneChanges deletes, while term holds, the entries written more than olderThan ago on
	// the database clock, and returns how many (an error wrapping ErrNotLeader, and nothing
	// deleted, once term has ended).
	PruneChanges(ctx context.Context, term Term, olderThan time.Duration) (int64, error)
	// ListenChanges opens a wake-up channel for new log entries. Notifications are hints
	// only: they may be lost or coalesced, and correctness never depends on them.
	ListenChanges(ctx context.Context) (ChangeListener, error)
}

// ChangeListener waits for change-log wake-ups.
type ChangeListener interface {
	// Wait blocks until a wake-up arrives (nil), ctx ends, or the listener breaks (an error;
	// the caller closes it and listens again).
	Wait(ctx context.Context) error
	// Close releases the listener.
	Close() error
}

// ChangeAnnouncer is a ChangeListener whose wake-ups may announce a change-log entry with its
// resource's row: PostgreSQL's for the agent, which hears a resource created alone so (see
// migration 0029), and acts on it without reading the log first.
type ChangeAnnouncer interface {
	ChangeListener
	// WaitAnnounced blocks as Wait does. When the wake-up announced an entry it returns it
	// (announced true) and keeps its row, which the store's ChangedResource then gives once;
	// a wake-up that announced nothing says only that the log has new entries.
	WaitAnnounced(ctx context.Context) (change Change, announced bool, err error)
}

// SlotRequest asks for a resource's slots on one of a provisioner's hosts.
type SlotRequest struct {
	Provisioner string
	ResourceID  string
	Owner       string
	Slots       int
	// Lease is the reconcile lease the request is made under; nil for a caller that holds
	// none (a health check's repair). See SlotStore for how it fences the write.
	Lease *Lease
	// Checked, for a request under no lease, is the row as the health check that decided
	// the request read it (a repair's reservation): the reservation is then made only while
	// the row is still so (see Checked), so that a repair racing a hibernate, a delete or
	// a wake reserves nothing. Nil for none; a request has a Lease or Checked, not both.
	Checked *Checked
	// Instant, for a request under neither a lease nor a check, makes the reservation's own
	// transaction provision the resource whole and record it ready (see InstantProvision).
	// Nil for none.
	Instant *InstantProvision
	// HostSlots returns the room host has, once pick has run, for the reservations of the
	// provisioner that name it (0: none, or not configured): what a store that runs
	// reservations at once holds the host to after the write, against every other committed
	// reservation (see SlotStore). It must agree with the room pick saw, and must not block
	// or do I/O.
	HostSlots func(host string) int
}

// InstantProvision makes a reservation the whole of a resource's provisioning, for a broker
// whose work is that one database transaction (the static pool: environ.InstantProvisioner).
// The transaction locks the resource row for update and makes the reservation only while
// the row is untouched as the caller read it: pending since it was created, at Generation,
// of the request's owner, of one of Types, with no provisioner or Provisioner, no live
// lease, no retry due, neither paused nor to be hibernated, no reservation yet, an owner
// without a quota, and a schema no newer than the store's build knows. Otherwise it writes
// nothing and gives an error wrapping ErrNotInstant, and the caller provisions the resource
// the usual way (claim, lease, records). In the same transaction the row is recorded ready
// (the Ready record's state and config, Message with its notice, observed at Generation,
// admitted on Provisioner at Units) with its lease token moved on, so that a write under any
// earlier lease is refused, and its history gets Steps and then the ready event, event for
// event as the claim and the records would have written them. The row lock fences the
// transaction for its whole life, and a kill at any point rolls all of it back.
type InstantProvision struct {
	Generation  int64
	Provisioner string
	Types       []ResourceType
	Units       int64
	// Steps are the steps the resource passes through on the way, in order, for its history.
	Steps []StatusStep
	// Message is the ready status message; a notice of the Ready record is added after "; ".
	Message string
	// Ready returns the record of the resource made ready with reservation res. It runs
	// inside the transaction: it must not block or do I/O.
	Ready func(res Reservation) (ReadyRecord, error)
	// Recorded, when not nil, is set to the row as recorded ready.
	Recorded *Resource
	// ReadyAt, when not nil, is set to the row's ready_at as recorded. A caller that needs
	// no more of the row asks for this alone: a store then reads no more of it back.
	ReadyAt *time.Time
}

// ReadyRecord is what a broker that provisions in one transaction reports of a resource
// made ready: its private state, the config clients reach it with, and a notice for its
// status message ("" for none).
type ReadyRecord struct {
	State  map[string]any
	Config map[string]any
	Notice string
}

// ReadyMessage is the status message of a resource ready at generation, with notice (a
// broker's remark; "" for none).
func ReadyMessage(generation int64, notice string) string {
	message := "ready at generation " + strconv.FormatInt(generation, 10)
	if notice != "" {
		message += "; " + notice
	}
	return message
}

// Reservation is a resource's hold on slots of one host.
type Reservation struct {
	Provisioner string
	ResourceID  string
	Owner       string
	Host        string
	Slots       int
}

// HostUsage is a host's committed slots, as seen inside a reservation transaction.
type HostUsage struct {
	Host           string
	UsedSlots      int // slots reserved on the host by every resource
	OwnerResources int // how many of the requesting owner's resources the host holds
}

// PickHost chooses a host for req given the committed usage of every host that holds a
// reservation of the provisioner (hosts with none are absent). existing is the resource's
// current reservation, or nil. It returns the host, or an error wrapping ErrNoCapacity.
// It runs inside the reservation's transaction: it must not block or do I/O. It may be
// called more than once for one request: again on the new usage, when another
// reservation filled the host it chose before this one committed.
type PickHost func(req SlotRequest, existing *Reservation, usage []HostUsage) (string, error)

// SlotStore keeps slot reservations so that no two reconciles, in one agent or in several,
// can ever overfill a host. pick is shown the committed usage. A store that runs a
// provisioner's reservations one at a time (SQLite, under its write lock) writes what pick
// chooses; one that runs them at once (PostgreSQL) writes a reservation that adds slots to a
// host only while the host, with every other committed reservation, holds no more than
// SlotRequest.HostSlots gives, and when a concurrent reservation filled the host first it
// writes nothing of this one and asks pick again on the usage as committed.
//
// Reservations are fenced by the resource's lease, checked in the reservation's own
// transaction with the resource row locked against a claim: a write under a lease applies
// only while the row still has that lease's holder and token (a row that is gone gives an
// error wrapping ErrNotFound), and a write under none only while nobody holds a live lease
// on the row (a row that is gone holds none, so an orphan's slots are always released). A
// refused write gives an error wrapping ErrLeaseHeld naming the current holder, and
// creates, moves or removes nothing. A reservation under none decided by a health check
// (SlotRequest.Checked) applies only while the row is still as the check read it, checked
// under the same lock: otherwise it gives an error wrapping ErrStale (ErrNotFound when the
// row is gone) and reserves nothing.
type SlotStore interface {
	// ReserveSlots atomically records (or resizes) req's reservation on the host pick
	// chooses. When the existing reservation already has req.Slots it is returned without
	// calling pick.
	ReserveSlots(ctx context.Context, req SlotRequest, pick PickHost) (Reservation, error)
	// ReleaseSlots removes the resource's reservation under lease (nil: none); a missing
	// one is not an error.
	ReleaseSlots(ctx context.Context, provisioner, resourceID string, lease *Lease) error
	// ListReservations returns the provisioner's reservations ordered by host, resource.
	ListReservations(ctx context.Context, provisioner string) ([]Reservation, error)
}

// ReservationReader reads reservations by resource, for the checks of resources that hold one.
type ReservationReader interface {
	// GetReservation returns the resource's reservation with the provisioner, or an error
	// wrapping ErrNotFound.
	GetReservation(ctx context.Context, provisioner, resourceID string) (Reservation, error)
	// GetReservations returns the reservations with the provisioner of those of resourceIDs
	// that hold one (ids that are not UUIDs hold none), ordered by resource.
	GetReservations(ctx context.Context, provisioner string, resourceIDs []string) ([]Reservation, error)
}

// HostReservations is what a provisioner's reservations hold on one host.
type HostReservations struct {
	Host      string
	Slots     int64 // slots reserved on the host
	Resources int64 // reservations on the host
}

// SlotSummary reads a pool's reservations whole without listing them, so that a pool's
// checks and capacity samples cost the same at any number of reservations.
type SlotSummary interface {
	// ReservedByHost returns what the provisioner's reservations hold on each host that
	// holds any, ordered by host.
	ReservedByHost(ctx context.Context, provisioner string) ([]HostReservations, error)
	// OrphanedReservations returns up to limit (at least 1) of the provisioner's
	// reservations whose resource row no longer exists, ordered by resource, from the first
	// resource id after after ("" for the first page; else the last id of the previous
	// page). A row being deleted still exists: its reservation is no orphan.
	OrphanedReservations(ctx context.Context, provisioner, after string, limit int) ([]Reservation, error)
}

// ProvisionerSpecStore remembers which spec each provisioner last ran with, so that a changed
// spec (a template, an image, a host's slots) is reconciled onto the resources it provisioned,
// whether it changed while the agent ran or while it was down.
type ProvisionerSpecStore interface {
	// ApplyProvisionerSpec records fingerprint as the provisioner's current spec. When a
	// different fingerprint was recorded before, every resource pinned to the provisioner that
	// is not being deleted gets its generation bumped (which writes a change-log entry), so
	// the agent reconciles it onto the new spec; it returns how many. The same fingerprint
	// again bumps nothing; the first one recorded for a provisioner bumps only its resources
	// in error (they failed because no agent knew the provisioner). Recording and bumping
	// are one transaction. A provisioner recorded absent (MarkProvisionersAbsent) differs
	// from every fingerprint, so putting it back bumps its resources.
	ApplyProvisionerSpec(ctx context.Context, provisioner, fingerprint string) (int64, error)
	// MarkProvisionersAbsent records every provisioner with a recorded spec that is not in
	// present as absent from the provisioner set, and returns those it newly marked, sorted.
	// It bumps nothing: the resources of an absent provisioner keep their status (a ready one
	// stays ready) until the provisioner is put back, when ApplyProvisionerSpec reconciles
	// them, including those that failed because it was missing.
	MarkProvisionersAbsent(ctx context.Context, present []string) ([]string, error)
}
