package statetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/berth-dev/berth/domain"
)

// eventKinds is every domain.EventKind, which the schema must accept.
var eventKinds = []domain.EventKind{domain.EventStatus, domain.EventError, domain.EventRepair, domain.EventHealth, domain.EventControl}

// The schema keeps no list of the statuses, resource types and event kinds the agent checks
// itself (migration 0014 dropped their CHECK constraints): every value the domain knows can
// be written by any program, and so can a name it does not know, so that adding a type, a
// status or an event kind never needs a table rebuild. The store still refuses a status the
// state machine lacks, as a field error naming the column.
func testSchemaKeepsTypesStatusesAndKindsAsNames(t *testing.T, b *Backend) {
	ctx := testContext(t)
	for i, ty := range []domain.ResourceType{domain.ResourceTypeRuntime, domain.ResourceTypeClickHouse, "widget"} {
		mustExec(t, b, `INSERT INTO resources (type, name, owner) VALUES ($1, $2, 'schema')`, string(ty), fmt.Sprintf("type-%d", i))
	}
	for i, s := range append(slices.Clone(domain.Statuses), "archived") {
		mustExec(t, b, `INSERT INTO resources (type, name, owner, status) VALUES ('runtime', $1, 'schema', $2)`, fmt.Sprintf("status-%d", i), string(s))
	}
	r := mustCreate(t, b, runtime("events"))
	for _, k := range append(slices.Clone(eventKinds), "note") {
		mustExec(t, b, `INSERT INTO resource_events (resource_id, kind, status) VALUES ($1, $2, 'pending')`, r.ID, string(k))
	}
	var widgets int
	if err := b.QueryRow(ctx, `SELECT count(*) FROM resources WHERE type = 'widget'`).Scan(&widgets); err != nil || widgets != 1 {
		t.Errorf("rows of type widget = %d, %v; want the one written", widgets, err)
	}

	// Through the store a status the state machine lacks is a field error naming the column.
	lease := mustClaim(t, b, r.ID, "agent-a")
	_, err := b.RecordProgress(ctx, r.ID, lease, domain.ProgressUpdate{Generation: r.Generation, Status: "gone"})
	if fe := (*domain.FieldError)(nil); !errors.As(err, &fe) || fe.Field != "status" {
		t.Errorf("progress to status gone: err = %v; want a field error on status", err)
	}
}

// A status the state machine lacks is refused by the store, naming every status there is. A
// type is only a name to the store (the environs declare the types, and plain SQL may write
// any name): one no environ serves is stored as written, and the Service refuses it, naming
// the types its catalog serves.
func testCheckErrorsListEveryStatusAndType(t *testing.T, b *Backend) {
	ctx := testContext(t)
	r := mustCreate(t, b, runtime("web"))
	lease := mustClaim(t, b, r.ID, "agent-a")
	_, err := b.RecordProgress(ctx, r.ID, lease, domain.ProgressUpdate{Generation: r.Generation, Status: "gone"})
	var fe *domain.FieldError
	if !errors.As(err, &fe) || fe.Field != "status" {
		t.Fatalf("progress to status gone: err = %v; want a field error on status", err)
	}
	for _, s := range domain.Statuses {
		if !strings.Contains(fe.Msg, string(s)) {
			t.Errorf("status error %q does not name %s", fe.Msg, s)
		}
	}
	served := servedTypes{domain.ResourceTypeRuntime, "widget"}
	_, err = domain.NewService(b, served).Create(ctx, domain.NewResource{Type: "vm", Name: "x"})
	if !errors.As(err, &fe) || fe.Field != "type" {
		t.Fatalf("create of type vm: err = %v; want a field error on type", err)
	}
	for _, ty := range served {
		if !strings.Contains(fe.Msg, string(ty)) {
			t.Errorf("type error %q does not name %s", fe.Msg, ty)
		}
	}
	vm, err := b.CreateResource(ctx, domain.NewResource{Type: "vm", Name: "x"})
	if err != nil || mustGet(t, b, vm.ID).Type != "vm" {
		t.Fatalf("store create of type vm: %+v, %v; want the type stored as written", vm, err)
	}
}

// servedTypes is a domain.TypeCatalog serving its types, each taking any args.
type servedTypes []domain.ResourceType

func (s servedTypes) TypeNames() []domain.ResourceType { return s }

func (s servedTypes) ValidateArgs(domain.ResourceType, map[string]any) error { return nil }
