package statetest

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	jujuerrors "github.com/juju/errors"

	"github.com/berth-dev/berth/domain"
)

func testCreateResource(t *testing.T, b *Backend) {
	ctx := testContext(t)
	r := mustCreate(t, b, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: "Web", Owner: "alice", Args: map[string]any{"slots": 2}})
	if r.ID == "" || r.Status != domain.StatusPending || r.Generation != 1 || r.ObservedGeneration != 0 {
		t.Fatalf("new resource = %+v, want pending at generation 1", r)
	}
	if r.Args["slots"] != float64(2) || r.State == nil || r.Config == nil || r.ReadyAt != nil {
		t.Fatalf("new resource = %+v, want args stored and empty state/config", r)
	}
	if r.CreatedAt.IsZero() || r.UpdatedAt.Before(r.CreatedAt) || time.Since(r.CreatedAt).Abs() > time.Minute {
		t.Fatalf("new resource created %v, updated %v; want both now", r.CreatedAt, r.UpdatedAt)
	}

	_, err := b.CreateResource(ctx, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: "wEB", Owner: "alice"})
	if !errors.Is(err, domain.ErrAlreadyExists) {
		t.Fatalf("duplicate name in another case: err = %v, want ErrAlreadyExists", err)
	}
	if !jujuerrors.Is(err, jujuerrors.AlreadyExists) {
		t.Errorf("duplicate name: err = %v, want juju/errors' AlreadyExists kind", err)
	}
	for _, part := range []string{`"alice"`, "runtime", `"wEB"`} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("duplicate error %q does not name %s", err, part)
		}
	}
	mustCreate(t, b, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: "web", Owner: "bob"})
	mustCreate(t, b, domain.NewResource{Type: domain.ResourceTypeClickHouse, Name: "web", Owner: "alice"})

	// The store keeps a type as a name: which names are served is the Service's to check
	// (see testCheckErrorsListEveryStatusAndType).
	for _, tc := range []struct {
		nr    domain.NewResource
		field string
	}{
		{domain.NewResource{Type: domain.ResourceTypeRuntime, Name: "  "}, "name"},
	} {
		_, err := b.CreateResource(ctx, tc.nr)
		var fe *domain.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("create %+v: err = %v, want a field error on %s", tc.nr, err, tc.field)
		}
	}
}

func testGetAndListResources(t *testing.T, b *Backend) {
	ctx := testContext(t)
	mustCreate(t, b, runtime("a"))
	rb := mustCreate(t, b, domain.NewResource{Type: domain.ResourceTypeClickHouse, Name: "b", Owner: "bob", Provisioner: "p1"})
	c := mustCreate(t, b, runtime("c"))

	got, err := b.GetResource(ctx, rb.ID)
	if err != nil || got.ID != rb.ID || got.Provisioner != "p1" || got.Owner != "bob" {
		t.Fatalf("get = %+v, %v; want resource b", got, err)
	}
	if upper, err := b.GetResource(ctx, strings.ToUpper(rb.ID)); err != nil || upper.ID != rb.ID {
		t.Fatalf("get by the id in upper case = %+v, %v; want resource b", upper, err)
	}
	for _, id := range []string{"00000000-0000-0000-0000-000000000000", "not-a-uuid"} {
		_, err := b.GetResource(ctx, id)
		if !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("get %s: err = %v, want ErrNotFound", id, err)
		}
		if !jujuerrors.Is(err, jujuerrors.NotFound) {
			t.Errorf("get %s: err = %v, want juju/errors' NotFound kind", id, err)
		}
		if want := "resource " + id + ": not found"; id != "not-a-uuid" && (err == nil || err.Error() != want) {
			t.Errorf("get %s: err = %v, want the message %q", id, err, want)
		}
	}

	names := func(rs []domain.Resource) string {
		var out []string
		for _, r := range rs {
			out = append(out, r.Name)
		}
		return strings.Join(out, ",")
	}
	if _, err := b.RequestDelete(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		f    domain.ListFilter
		want string
	}{
		{domain.ListFilter{}, "a,b,c"},
		{domain.ListFilter{Owner: "alice"}, "a,c"},
		{domain.ListFilter{Type: domain.ResourceTypeClickHouse}, "b"},
		{domain.ListFilter{Provisioner: "p1"}, "b"},
		{domain.ListFilter{Status: domain.StatusDeleting}, "c"},
		{domain.ListFilter{Owner: "alice", Status: domain.StatusPending}, "a"},
		{domain.ListFilter{Limit: 2}, "a,b"},
	} {
		rs, err := b.ListResources(ctx, tc.f)
		if err != nil {
			t.Fatalf("list %+v: %v", tc.f, err)
		}
		if got := names(rs); got != tc.want {
			t.Errorf("list %+v = %s, want %s", tc.f, got, tc.want)
		}
	}
}

func testUpdateResourceArgs(t *testing.T, b *Backend) {
	ctx := testContext(t)
	r := mustCreate(t, b, runtime("web"))
	mustExec(t, b, `UPDATE resources SET attempts = 3, last_error = 'boom', next_attempt_at = $2 WHERE id = $1`, r.ID, time.Now())

	same, err := b.UpdateResourceArgs(ctx, r.ID, map[string]any{"slots": 1})
	if err != nil || same.Generation != 1 || same.Attempts != 3 {
		t.Fatalf("update with equal args = %+v, %v; want generation 1 and retry state kept", same, err)
	}
	seq := latestSeq(t, b)
	bumped, err := b.UpdateResourceArgs(ctx, r.ID, map[string]any{"slots": 2})
	if err != nil {
		t.Fatal(err)
	}
	if bumped.Generation != 2 || bumped.Attempts != 0 || bumped.LastError != "" || bumped.NextAttemptAt != nil || bumped.Args["slots"] != float64(2) {
		t.Fatalf("update with new args = %+v, want generation 2 and retry state reset", bumped)
	}
	if got := changesSince(t, b, seq); len(got) != 1 || got[0] != r.ID {
		t.Fatalf("changes logged by the args update = %v, want [%s]", got, r.ID)
	}

	if _, err := b.UpdateResourceArgs(ctx, r.ID, map[string]any{"slots": "x"}); err != nil {
		t.Fatalf("the store leaves args validation to the domain: %v", err)
	}
	if _, err := b.RequestDelete(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.UpdateResourceArgs(ctx, r.ID, map[string]any{"slots": 3}); !errors.Is(err, domain.ErrStale) {
		t.Fatalf("update of a deleting resource: err = %v, want ErrStale", err)
	}
	if _, err := b.UpdateResourceArgs(ctx, "00000000-0000-0000-0000-000000000000", nil); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("update of a missing resource: err = %v, want ErrNotFound", err)
	}
}

func testRequestDeleteIsIdempotent(t *testing.T, b *Backend) {
	ctx := testContext(t)
	r := mustCreate(t, b, runtime("web"))
	seq := latestSeq(t, b)
	first, err := b.RequestDelete(ctx, r.ID)
	if err != nil || first.Status != domain.StatusDeleting || first.StatusMessage != "delete requested" {
		t.Fatalf("request delete = %+v, %v", first, err)
	}
	again, err := b.RequestDelete(ctx, r.ID)
	if err != nil || again.Status != domain.StatusDeleting {
		t.Fatalf("request delete again = %+v, %v", again, err)
	}
	if got := changesSince(t, b, seq); len(got) != 1 {
		t.Fatalf("changes logged by two delete requests = %v, want one", got)
	}
	if _, err := b.RequestDelete(ctx, "00000000-0000-0000-0000-000000000000"); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("request delete of a missing resource: err = %v, want ErrNotFound", err)
	}
}

func testDirectSQLGetsTheSameBehaviour(t *testing.T, b *Backend) {
	ctx := testContext(t)
	r := mustCreate(t, b, runtime("web"))
	if got := changesSince(t, b, 0); len(got) != 1 || got[0] != r.ID {
		t.Fatalf("changes logged by the insert = %v, want [%s]", got, r.ID)
	}

	seq := latestSeq(t, b)
	mustExec(t, b, `UPDATE resources SET attempts = 4, last_error = 'x' WHERE id = $1`, r.ID)
	mustExec(t, b, `UPDATE resources SET args = '{"slots": 5}' WHERE id = $1`, r.ID)
	got := mustGet(t, b, r.ID)
	if got.Generation != 2 || got.Attempts != 0 || got.LastError != "" || !got.UpdatedAt.After(r.UpdatedAt) || got.Args["slots"] != float64(5) {
		t.Fatalf("after a direct args update: %+v, want generation 2, retry state reset, updated_at moved", got)
	}
	if ids := changesSince(t, b, seq); len(ids) != 1 || ids[0] != r.ID {
		t.Fatalf("changes logged by direct updates = %v, want only the args change", ids)
	}
	// The same args written differently are the same args.
	mustExec(t, b, `UPDATE resources SET args = '{ "slots":5 }' WHERE id = $1`, r.ID)
	if again := mustGet(t, b, r.ID); again.Generation != 2 || !again.UpdatedAt.After(got.UpdatedAt) {
		t.Fatalf("after rewriting the same args: generation %d, updated %v (was %v); want generation 2 and updated_at moved",
			again.Generation, again.UpdatedAt, got.UpdatedAt)
	}

	seq = latestSeq(t, b)
	mustExec(t, b, `UPDATE resources SET provisioner = 'p1' WHERE id = $1`, r.ID)
	if ids := changesSince(t, b, seq); len(ids) != 0 {
		t.Fatalf("setting an unset provisioner logged %v, want nothing (it is how the agent pins)", ids)
	}
	mustExec(t, b, `UPDATE resources SET provisioner = 'p2' WHERE id = $1`, r.ID)
	if ids := changesSince(t, b, seq); len(ids) != 1 {
		t.Fatalf("changing a set provisioner logged %v, want one change", ids)
	}

	mustExec(t, b, `UPDATE resources SET observed_generation = 2, status = 'ready' WHERE id = $1`, r.ID)
	if _, err := b.Exec(ctx, `UPDATE resources SET provisioner = 'p3' WHERE id = $1`, r.ID); err == nil ||
		!strings.Contains(err.Error(), "provisioner cannot change") {
		t.Fatalf("moving a provisioned resource to another provisioner: err = %v, want it refused", err)
	}
	// The schema keeps no list of statuses (the agent checks those it writes): a status a
	// client writes directly is kept as written, and the row still reads.
	mustExec(t, b, `UPDATE resources SET status = 'gone' WHERE id = $1`, r.ID)
	if got := mustGet(t, b, r.ID); got.Status != "gone" {
		t.Fatalf("a direct write of status gone reads back as %q", got.Status)
	}
	mustExec(t, b, `UPDATE resources SET status = 'ready' WHERE id = $1`, r.ID)

	mustExec(t, b, `UPDATE resources SET attempts = 3, last_error = 'boom', next_attempt_at = $2 WHERE id = $1`, r.ID, time.Now().Add(time.Hour))
	seq = latestSeq(t, b)
	if n := mustExec(t, b, `DELETE FROM resources WHERE id = $1`, r.ID); n != 0 {
		t.Fatalf("direct delete removed %d rows, want it turned into a delete request", n)
	}
	got = mustGet(t, b, r.ID)
	if got.Status != domain.StatusDeleting || got.StatusMessage != "delete requested" {
		t.Fatalf("after a direct delete: %+v; want the row deleting", got)
	}
	if got.Attempts != 0 || got.LastError != "" || got.NextAttemptAt != nil {
		t.Fatalf("after a direct delete: attempts %d, last error %q, next attempt %v; want a fresh retry budget", got.Attempts, got.LastError, got.NextAttemptAt)
	}
	if ids := changesSince(t, b, seq); len(ids) != 1 || ids[0] != r.ID {
		t.Fatalf("changes logged by the direct delete = %v, want [%s]", ids, r.ID)
	}

	// A delete requested is carried out: no writer, the agent's role included, moves the
	// row out of deleting (cancelling the delete mid-deprovision).
	if _, err := b.Exec(ctx, `UPDATE resources SET status = 'ready' WHERE id = $1`, r.ID); err == nil || !strings.Contains(err.Error(), "deleting") {
		t.Fatalf("moving a deleting row to ready: %v, want it refused saying the row stays deleting", err)
	}
	if got := mustGet(t, b, r.ID); got.Status != domain.StatusDeleting {
		t.Fatalf("after the refused write: status %s, want deleting", got.Status)
	}

	// An operator who must drop a row without deprovisioning it says so first, as the agent
	// does when it finalizes a delete.
	seq = latestSeq(t, b)
	err := b.Tx(ctx, func(exec ExecFunc) error {
		var err error
		if b.Dialect == Postgres {
			_, err = exec(ctx, `SET LOCAL berth.finalizing = 'on'`)
		} else {
			_, err = exec(ctx, `INSERT INTO write_intents (resource_id, intent) VALUES ($1, 'finalize')`, r.ID)
		}
		if err != nil {
			return err
		}
		n, err := exec(ctx, `DELETE FROM resources WHERE id = $1`, r.ID)
		if err == nil && n != 1 {
			t.Errorf("finalizing delete removed %d rows, want 1", n)
		}
		return err
	})
	if err != nil {
		t.Fatalf("finalizing delete: %v", err)
	}
	if _, err := b.GetResource(ctx, r.ID); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("after a finalizing delete: err = %v, want ErrNotFound", err)
	}
	if ids := changesSince(t, b, seq); len(ids) != 1 || ids[0] != r.ID {
		t.Fatalf("changes logged by the row's removal = %v, want [%s]", ids, r.ID)
	}

	// The finalizing intent applied to that delete only: a later direct delete of another
	// row is a delete request again.
	other := mustCreate(t, b, runtime("other"))
	mustExec(t, b, `DELETE FROM resources WHERE id = $1`, other.ID)
	if got := mustGet(t, b, other.ID); got.Status != domain.StatusDeleting {
		t.Fatalf("a direct delete after a finalizing one: status %s, want deleting", got.Status)
	}
}

var uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

func testDirectInsert(t *testing.T, b *Backend) {
	ctx := testContext(t)
	seq := latestSeq(t, b)
	mustExec(t, b, `INSERT INTO resources (type, name, owner, args) VALUES ('runtime', 'direct', 'carol', '{"slots": 2}')`)
	rs, err := b.ListResources(ctx, domain.ListFilter{Owner: "carol"})
	if err != nil || len(rs) != 1 {
		t.Fatalf("list after a direct insert = %+v, %v; want the row", rs, err)
	}
	r := rs[0]
	if !uuidPattern.MatchString(r.ID) || r.Status != domain.StatusPending || r.Generation != 1 || r.Args["slots"] != float64(2) ||
		time.Since(r.CreatedAt).Abs() > time.Minute {
		t.Fatalf("directly inserted resource = %+v, want a UUID id, pending at generation 1, created now", r)
	}
	if ids := changesSince(t, b, seq); len(ids) != 1 || ids[0] != r.ID {
		t.Fatalf("changes logged by the direct insert = %v, want [%s]", ids, r.ID)
	}
	if es, err := b.ListEvents(ctx, r.ID, 0); err != nil || len(es) != 1 || es[0].Message != "created" {
		t.Fatalf("events of the directly inserted resource = %+v, %v; want its creation", es, err)
	}

	// A type is a name to the schema: a row of a type no environ serves is stored, and the
	// agent gives it an error naming the served types (environ.UnknownTypeError).
	mustExec(t, b, `INSERT INTO resources (type, name) VALUES ('vm', 'x')`)
	for _, bad := range []string{
		`INSERT INTO resources (type, name, args) VALUES ('runtime', 'x', '[1]')`,
		`INSERT INTO resources (type, name, args) VALUES ('runtime', 'x', 'not json')`,
		`INSERT INTO resources (type, name, owner) VALUES ('runtime', 'DIRECT', 'carol')`,
	} {
		if _, err := b.Exec(ctx, bad); err == nil {
			t.Errorf("%s was accepted", bad)
		}
	}
	mustExec(t, b, `INSERT INTO resources (type, name, owner) VALUES ('runtime', 'DIRECT', 'dave')`)
}
