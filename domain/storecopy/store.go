package storecopy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Table names a table Copy copies.
type Table string

const (
	Resources        Table = "resources"
	Reservations     Table = "slot_reservations"
	Events           Table = "resource_events"
	Changes          Table = "change_log"
	CapacitySamples  Table = "capacity_samples"
	CapacityWarnings Table = "capacity_warnings"
	ProvisionerSpecs Table = "provisioner_specs"
	OwnerPolicies    Table = "owner_policies"
	OwnerQuotas      Table = "owner_quotas"
)

// AllTables are the tables Copy copies, in the order it copies them.
var AllTables = []Table{Resources, Reservations, Events, Changes, CapacitySamples, CapacityWarnings, ProvisionerSpecs,
	OwnerPolicies, OwnerQuotas}

// BatchSize is the most rows a View hands over in one Batch.
const BatchSize = 1000

// Store is a store rows can be copied out of and into.
type Store interface {
	Source
	Target
}

// Source is a store rows can be copied out of.
type Source interface {
	// Export runs f on one consistent, read-only view of the store, which ends when f
	// returns. It fails when the store's schema is not the one this build of Berth knows,
	// saying how to bring it there.
	Export(ctx context.Context, f func(View) error) error
}

// Target is a store rows can be copied into.
type Target interface {
	// Import runs f in one write transaction on the store's migrated schema, in which the
	// tables' triggers do not fire and no other writer can write them, and commits it when
	// f returns nil (after recomputing what the triggers would have derived from the rows
	// f wrote: the slot usage); otherwise nothing f wrote remains.
	Import(ctx context.Context, f func(Importer) error) error
}

// View is a consistent view of a store's tables.
type View interface {
	// Count counts each table's rows.
	Count(ctx context.Context) (Counts, error)
	// Read hands every row of every table to emit, table by table in AllTables order, in
	// batches of at most BatchSize rows of one table.
	Read(ctx context.Context, emit func(Batch) error) error
	// Positions returns the highest sequence numbers the store has handed out.
	Positions(ctx context.Context) (Positions, error)
}

// Importer writes rows as they are, inside Import's transaction, and sees what it wrote.
type Importer interface {
	View
	// Write inserts the batch's rows with every column as given.
	Write(ctx context.Context, b Batch) error
	// SetPositions makes the store hand out sequence numbers after p's (and after every
	// row's), so that entries written later sort after the copied ones.
	SetPositions(ctx context.Context, p Positions) error
}

// Positions are the highest sequence numbers a store has handed out; entries may have been
// pruned since, so they can be above every row's.
type Positions struct {
	ChangeLog int64 // change_log.seq
	Events    int64 // resource_events.seq
}

// Counts is the number of rows of each table.
type Counts map[Table]int64

// Empty reports whether no table holds a row.
func (c Counts) Empty() bool {
	for _, n := range c {
		if n != 0 {
			return false
		}
	}
	return true
}

// Resource is a row of resources, every column. JSON columns hold JSON text.
type Resource struct {
	ID                 string
	Type               string
	Name               string
	Owner              string
	Provisioner        string
	Args               string
	Generation         int64
	ObservedGeneration int64
	Status             string
	StatusMessage      string
	State              string
	Config             string
	Attempts           int64
	NextAttemptAt      *time.Time
	LastError          string
	LeaseHolder        *string
	LeaseExpiresAt     *time.Time
	LeaseToken         int64
	CreatedAt          time.Time
	UpdatedAt          time.Time
	ReadyAt            *time.Time
	UnhealthySince     *time.Time
	Labels             string
	Paused             bool
	Hibernate          bool
	RetryRequestedAt   *time.Time
	StatusChangedAt    time.Time
	Reason             string
	WaitingSince       *time.Time
	LastAttemptAt      *time.Time
	// AdmittedProvisioner and AdmittedUnits are the resource's admission against its
	// owner's quota (nil: not admitted); the owner's usage is summed from them.
	AdmittedProvisioner *string
	AdmittedUnits       *int64
}

// Reservation is a row of slot_reservations.
type Reservation struct {
	Provisioner string
	ResourceID  string
	Owner       string
	Host        string
	Slots       int64
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// Event is a row of resource_events.
type Event struct {
	Seq        int64
	ResourceID string
	At         time.Time
	Kind       string
	Status     string
	Message    string
}

// Change is a row of change_log.
type Change struct {
	Seq        int64
	ResourceID string
	CreatedAt  time.Time
	Owner      *string // nil for an entry written without one (before migration 0028)
}

// CapacitySample is a row of capacity_samples.
type CapacitySample struct {
	At          time.Time
	Provisioner string
	Host        string
	Unit        string
	Total       int64
	Used        int64
	Down        bool
}

// CapacityWarning is a row of capacity_warnings.
type CapacityWarning struct {
	Provisioner string
	Kind        string
	Active      bool
	Message     string
	Since       time.Time
	UpdatedAt   time.Time
}

// ProvisionerSpec is a row of provisioner_specs.
type ProvisionerSpec struct {
	Provisioner string
	Fingerprint string
	AppliedAt   time.Time
}

// OwnerPolicy is a row of owner_policies.
type OwnerPolicy struct {
	Owner     string
	Weight    int64
	Class     string
	UpdatedAt time.Time
}

// OwnerQuota is a row of owner_quotas; a nil maximum is an uncapped measure.
type OwnerQuota struct {
	Owner        string
	Provisioner  string
	MaxResources *int64
	MaxSlots     *int64
	UpdatedAt    time.Time
}

// Batch is rows of one table: exactly one field is set.
type Batch struct {
	Resources        []Resource
	Reservations     []Reservation
	Events           []Event
	Changes          []Change
	CapacitySamples  []CapacitySample
	CapacityWarnings []CapacityWarning
	ProvisionerSpecs []ProvisionerSpec
	OwnerPolicies    []OwnerPolicy
	OwnerQuotas      []OwnerQuota
}

// Table is the table the batch's rows belong to ("" for an empty batch).
func (b Batch) Table() Table {
	switch {
	case len(b.Resources) > 0:
		return Resources
	case len(b.Reservations) > 0:
		return Reservations
	case len(b.Events) > 0:
		return Events
	case len(b.Changes) > 0:
		return Changes
	case len(b.CapacitySamples) > 0:
		return CapacitySamples
	case len(b.CapacityWarnings) > 0:
		return CapacityWarnings
	case len(b.ProvisionerSpecs) > 0:
		return ProvisionerSpecs
	case len(b.OwnerPolicies) > 0:
		return OwnerPolicies
	case len(b.OwnerQuotas) > 0:
		return OwnerQuotas
	}
	return ""
}

// Columns are the table's columns, in the order Batch.Values gives a row's values.
func (t Table) Columns() []string { return columns[t] }

var columns = map[Table][]string{
	Resources: {"id", "type", "name", "owner", "provisioner", "args", "generation", "observed_generation",
		"status", "status_message", "state", "config", "attempts", "next_attempt_at", "last_error",
		"lease_holder", "lease_expires_at", "lease_token", "created_at", "updated_at", "ready_at", "unhealthy_since",
		"labels", "paused", "hibernate", "retry_requested_at", "status_changed_at", "reason", "waiting_since", "last_attempt_at",
		"admitted_provisioner", "admitted_units"},
	Reservations:     {"provisioner", "resource_id", "owner", "host", "slots", "created_at", "updated_at"},
	Events:           {"seq", "resource_id", "at", "kind", "status", "message"},
	Changes:          {"seq", "resource_id", "created_at", "owner"},
	CapacitySamples:  {"at", "provisioner", "host", "unit", "total", "used", "down"},
	CapacityWarnings: {"provisioner", "kind", "active", "message", "since", "updated_at"},
	ProvisionerSpecs: {"provisioner", "fingerprint", "applied_at"},
	OwnerPolicies:    {"owner", "weight", "class", "updated_at"},
	OwnerQuotas:      {"owner", "provisioner", "max_resources", "max_slots", "updated_at"},
}

// keys are each table's key, in whose order a View reads the table's rows.
var keys = map[Table]string{
	Resources:        "id",
	Reservations:     "provisioner, resource_id",
	Events:           "seq",
	Changes:          "seq",
	CapacitySamples:  "provisioner, host, at",
	CapacityWarnings: "provisioner, kind",
	ProvisionerSpecs: "provisioner",
	OwnerPolicies:    "owner",
	OwnerQuotas:      "owner, provisioner",
}

// ReadQuery is the query a View reads the table with: its Columns in order, each as column
// writes it in the store's dialect (a cast to text, say), in key order. The column list has
// this one home, so a store cannot read columns in another order than Batch.Values gives.
func (t Table) ReadQuery(column func(name string) string) string {
	cols := t.Columns()
	exprs := make([]string, len(cols))
	for i, c := range cols {
		exprs[i] = column(c)
	}
	return "SELECT " + strings.Join(exprs, ", ") + " FROM " + string(t) + " ORDER BY " + keys[t]
}

// jsonColumns are the columns (all of resources) whose text is JSON.
var jsonColumns = map[string]bool{"args": true, "state": true, "config": true, "labels": true}

// Values returns the batch's rows, each as its values in its table's Columns order. A value
// is a string, int64, bool, time.Time, or a *time.Time, *string or *int64 that is nil for
// NULL.
func (b Batch) Values() [][]any {
	out := make([][]any, 0, b.Len())
	for _, r := range b.Resources {
		out = append(out, []any{r.ID, r.Type, r.Name, r.Owner, r.Provisioner, r.Args, r.Generation, r.ObservedGeneration,
			r.Status, r.StatusMessage, r.State, r.Config, r.Attempts, r.NextAttemptAt, r.LastError,
			r.LeaseHolder, r.LeaseExpiresAt, r.LeaseToken, r.CreatedAt, r.UpdatedAt, r.ReadyAt, r.UnhealthySince,
			r.Labels, r.Paused, r.Hibernate, r.RetryRequestedAt, r.StatusChangedAt, r.Reason, r.WaitingSince, r.LastAttemptAt,
			r.AdmittedProvisioner, r.AdmittedUnits})
	}
	for _, r := range b.Reservations {
		out = append(out, []any{r.Provisioner, r.ResourceID, r.Owner, r.Host, r.Slots, r.CreatedAt, r.UpdatedAt})
	}
	for _, r := range b.Events {
		out = append(out, []any{r.Seq, r.ResourceID, r.At, r.Kind, r.Status, r.Message})
	}
	for _, r := range b.Changes {
		out = append(out, []any{r.Seq, r.ResourceID, r.CreatedAt, r.Owner})
	}
	for _, r := range b.CapacitySamples {
		out = append(out, []any{r.At, r.Provisioner, r.Host, r.Unit, r.Total, r.Used, r.Down})
	}
	for _, r := range b.CapacityWarnings {
		out = append(out, []any{r.Provisioner, r.Kind, r.Active, r.Message, r.Since, r.UpdatedAt})
	}
	for _, r := range b.ProvisionerSpecs {
		out = append(out, []any{r.Provisioner, r.Fingerprint, r.AppliedAt})
	}
	for _, r := range b.OwnerPolicies {
		out = append(out, []any{r.Owner, r.Weight, r.Class, r.UpdatedAt})
	}
	for _, r := range b.OwnerQuotas {
		out = append(out, []any{r.Owner, r.Provisioner, r.MaxResources, r.MaxSlots, r.UpdatedAt})
	}
	return out
}

// Len is the number of rows in the batch.
func (b Batch) Len() int {
	return len(b.Resources) + len(b.Reservations) + len(b.Events) + len(b.Changes) +
		len(b.CapacitySamples) + len(b.CapacityWarnings) + len(b.ProvisionerSpecs) +
		len(b.OwnerPolicies) + len(b.OwnerQuotas)
}

// CheckSchemaVersion says what to do when a store's schema (have, its highest migration
// applied; 0 for none) is not the one this build of Berth knows (want): both stores of a
// copy must be at want.
func CheckSchemaVersion(have, want int) error {
	switch {
	case have == 0:
		return errors.New("the database has no Berth schema: run `berth migrate` on it first")
	case have < want:
		return fmt.Errorf("the database's schema is at version %d and this berth's is at %d: run `berth migrate` on it first", have, want)
	case have > want:
		return fmt.Errorf("the database's schema is at version %d, newer than this berth knows (%d): use the berth that migrated it", have, want)
	}
	return nil
}
