package statetest

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/berth-dev/berth/domain"
)

// eventKinds is every domain.EventKind, which the schema's resource_events_kind_check must
// accept and nothing else.
var eventKinds = []domain.EventKind{domain.EventStatus, domain.EventError, domain.EventRepair, domain.EventHealth, domain.EventControl}

// The schema's CHECK constraints accept exactly the domain's statuses, resource types and
// event kinds: a value the domain knows can be written by any program, one it does not know is
// refused by the database with the constraint that the stores explain as a field error.
func testSchemaChecksAcceptExactlyTheDomainsValues(t *testing.T, b *Backend) {
	ctx := testContext(t)
	for i, ty := range domain.ResourceTypes {
		mustExec(t, b, `INSERT INTO resources (type, name, owner) VALUES ($1, $2, 'schema')`, string(ty), fmt.Sprintf("type-%d", i))
	}
	for i, s := range domain.Statuses {
		mustExec(t, b, `INSERT INTO resources (type, name, owner, status) VALUES ('runtime', $1, 'schema', $2)`, fmt.Sprintf("status-%d", i), string(s))
	}
	r := mustCreate(t, b, runtime("events"))
	for _, k := range eventKinds {
		mustExec(t, b, `INSERT INTO resource_events (resource_id, kind, status) VALUES ($1, $2, 'pending')`, r.ID, string(k))
	}

	for _, bad := range []struct {
		query      string
		args       []any
		constraint string
	}{
		{`INSERT INTO resources (type, name) VALUES ($1, 'bad-type')`, []any{"vm"}, "resources_type_check"},
		{`INSERT INTO resources (type, name, status) VALUES ('runtime', 'bad-status', $1)`, []any{"gone"}, "resources_status_check"},
		{`INSERT INTO resource_events (resource_id, kind, status) VALUES ($1, $2, 'pending')`, []any{r.ID, "note"}, "resource_events_kind_check"},
	} {
		if _, err := b.Exec(ctx, bad.query, bad.args...); err == nil || !strings.Contains(err.Error(), bad.constraint) {
			t.Errorf("%s with %v: err = %v; want it refused by %s", bad.query, bad.args, err, bad.constraint)
		}
	}

	// Through the store the same refusal is a field error naming the column.
	lease := mustClaim(t, b, r.ID, "agent-a")
	_, err := b.RecordProgress(ctx, r.ID, lease, domain.ProgressUpdate{Generation: r.Generation, Status: "gone"})
	if fe := (*domain.FieldError)(nil); !errors.As(err, &fe) || fe.Field != "status" {
		t.Errorf("progress to status gone: err = %v; want a field error on status", err)
	}
}
