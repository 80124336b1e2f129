package postgres_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/berth-dev/berth/domain"
)

func TestCreateResource(t *testing.T) {
	st := newState(t)
	ctx := testContext(t)
	r := mustCreate(t, st, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: "Web", Owner: "alice", Args: map[string]any{"slots": 2}})
	if r.ID == "" || r.Status != domain.StatusPending || r.Generation != 1 || r.ObservedGeneration != 0 {
		t.Fatalf("new resource = %+v, want pending at generation 1", r)
	}
	if r.Args["slots"] != float64(2) || r.State == nil || r.Config == nil || r.ReadyAt != nil {
		t.Fatalf("new resource = %+v, want args stored and empty state/config", r)
	}

	_, err := st.CreateResource(ctx, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: "wEB", Owner: "alice"})
	if !errors.Is(err, domain.ErrAlreadyExists) {
		t.Fatalf("duplicate name in another case: err = %v, want ErrAlreadyExists", err)
	}
	for _, part := range []string{`"alice"`, "runtime", `"wEB"`} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("duplicate error %q does not name %s", err, part)
		}
	}
	mustCreate(t, st, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: "web", Owner: "bob"})
	mustCreate(t, st, domain.NewResource{Type: domain.ResourceTypeClickHouse, Name: "web", Owner: "alice"})

	for _, tc := range []struct {
		nr    domain.NewResource
		field string
	}{
		{domain.NewResource{Type: "vm", Name: "x"}, "type"},
		{domain.NewResource{Type: domain.ResourceTypeRuntime, Name: "  "}, "name"},
	} {
		_, err := st.CreateResource(ctx, tc.nr)
		var fe *domain.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("create %+v: err = %v, want a field error on %s", tc.nr, err, tc.field)
		}
	}
}

func TestGetAndListResources(t *testing.T) {
	st := newState(t)
	ctx := testContext(t)
	mustCreate(t, st, runtime("a"))
	b := mustCreate(t, st, domain.NewResource{Type: domain.ResourceTypeClickHouse, Name: "b", Owner: "bob", Provisioner: "p1"})
	c := mustCreate(t, st, runtime("c"))

	got, err := st.GetResource(ctx, b.ID)
	if err != nil || got.ID != b.ID || got.Provisioner != "p1" || got.Owner != "bob" {
		t.Fatalf("get = %+v, %v; want resource b", got, err)
	}
	for _, id := range []string{"00000000-0000-0000-0000-000000000000", "not-a-uuid"} {
		if _, err := st.GetResource(ctx, id); !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("get %s: err = %v, want ErrNotFound", id, err)
		}
	}

	ids := func(rs []domain.Resource) string {
		var out []string
		for _, r := range rs {
			out = append(out, r.Name)
		}
		return strings.Join(out, ",")
	}
	if _, err := st.RequestDelete(ctx, c.ID); err != nil {
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
		rs, err := st.ListResources(ctx, tc.f)
		if err != nil {
			t.Fatalf("list %+v: %v", tc.f, err)
		}
		if got := ids(rs); got != tc.want {
			t.Errorf("list %+v = %s, want %s", tc.f, got, tc.want)
		}
	}
}

func TestUpdateResourceArgs(t *testing.T) {
	st := newState(t)
	ctx := testContext(t)
	r := mustCreate(t, st, runtime("web"))
	mustExec(t, st, `UPDATE resources SET attempts = 3, last_error = 'boom', next_attempt_at = now() WHERE id = $1`, r.ID)

	same, err := st.UpdateResourceArgs(ctx, r.ID, map[string]any{"slots": 1})
	if err != nil || same.Generation != 1 || same.Attempts != 3 {
		t.Fatalf("update with equal args = %+v, %v; want generation 1 and retry state kept", same, err)
	}
	seq := latestSeq(t, st)
	bumped, err := st.UpdateResourceArgs(ctx, r.ID, map[string]any{"slots": 2})
	if err != nil {
		t.Fatal(err)
	}
	if bumped.Generation != 2 || bumped.Attempts != 0 || bumped.LastError != "" || bumped.NextAttemptAt != nil || bumped.Args["slots"] != float64(2) {
		t.Fatalf("update with new args = %+v, want generation 2 and retry state reset", bumped)
	}
	if got := changesSince(t, st, seq); len(got) != 1 || got[0] != r.ID {
		t.Fatalf("changes logged by the args update = %v, want [%s]", got, r.ID)
	}

	if _, err := st.UpdateResourceArgs(ctx, r.ID, map[string]any{"slots": "x"}); err != nil {
		t.Fatalf("the store leaves args validation to the domain: %v", err)
	}
	if _, err := st.RequestDelete(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := st.UpdateResourceArgs(ctx, r.ID, map[string]any{"slots": 3}); !errors.Is(err, domain.ErrStale) {
		t.Fatalf("update of a deleting resource: err = %v, want ErrStale", err)
	}
	if _, err := st.UpdateResourceArgs(ctx, "00000000-0000-0000-0000-000000000000", nil); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("update of a missing resource: err = %v, want ErrNotFound", err)
	}
}

func TestRequestDeleteIsIdempotent(t *testing.T) {
	st := newState(t)
	ctx := testContext(t)
	r := mustCreate(t, st, runtime("web"))
	seq := latestSeq(t, st)
	first, err := st.RequestDelete(ctx, r.ID)
	if err != nil || first.Status != domain.StatusDeleting || first.StatusMessage != "delete requested" {
		t.Fatalf("request delete = %+v, %v", first, err)
	}
	again, err := st.RequestDelete(ctx, r.ID)
	if err != nil || again.Status != domain.StatusDeleting {
		t.Fatalf("request delete again = %+v, %v", again, err)
	}
	if got := changesSince(t, st, seq); len(got) != 1 {
		t.Fatalf("changes logged by two delete requests = %v, want one", got)
	}
	if _, err := st.RequestDelete(ctx, "00000000-0000-0000-0000-000000000000"); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("request delete of a missing resource: err = %v, want ErrNotFound", err)
	}
}

func TestDirectSQLGetsTheSameBehaviour(t *testing.T) {
	st := newState(t)
	ctx := testContext(t)
	r := mustCreate(t, st, runtime("web"))
	if got := changesSince(t, st, 0); len(got) != 1 || got[0] != r.ID {
		t.Fatalf("changes logged by the insert = %v, want [%s]", got, r.ID)
	}

	seq := latestSeq(t, st)
	mustExec(t, st, `UPDATE resources SET attempts = 4, last_error = 'x' WHERE id = $1`, r.ID)
	mustExec(t, st, `UPDATE resources SET args = '{"slots": 5}' WHERE id = $1`, r.ID)
	got, err := st.GetResource(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Generation != 2 || got.Attempts != 0 || got.LastError != "" || !got.UpdatedAt.After(r.UpdatedAt) {
		t.Fatalf("after a direct args update: %+v, want generation 2, retry state reset, updated_at moved", got)
	}
	if ids := changesSince(t, st, seq); len(ids) != 1 || ids[0] != r.ID {
		t.Fatalf("changes logged by direct updates = %v, want only the args change", ids)
	}

	seq = latestSeq(t, st)
	mustExec(t, st, `UPDATE resources SET provisioner = 'p1' WHERE id = $1`, r.ID)
	if ids := changesSince(t, st, seq); len(ids) != 0 {
		t.Fatalf("setting an unset provisioner logged %v, want nothing (it is how the agent pins)", ids)
	}
	mustExec(t, st, `UPDATE resources SET provisioner = 'p2' WHERE id = $1`, r.ID)
	if ids := changesSince(t, st, seq); len(ids) != 1 {
		t.Fatalf("changing a set provisioner logged %v, want one change", ids)
	}

	mustExec(t, st, `UPDATE resources SET observed_generation = 2, status = 'ready' WHERE id = $1`, r.ID)
	if _, err := st.Pool().Exec(ctx, `UPDATE resources SET provisioner = 'p3' WHERE id = $1`, r.ID); err == nil ||
		!strings.Contains(err.Error(), "provisioner cannot change") {
		t.Fatalf("moving a provisioned resource to another provisioner: err = %v, want it refused", err)
	}

	mustExec(t, st, `UPDATE resources SET attempts = 3, last_error = 'boom', next_attempt_at = now() + interval '1 hour' WHERE id = $1`, r.ID)
	seq = latestSeq(t, st)
	if n := mustExec(t, st, `DELETE FROM resources WHERE id = $1`, r.ID); n != 0 {
		t.Fatalf("direct delete removed %d rows, want it turned into a delete request", n)
	}
	got, err = st.GetResource(ctx, r.ID)
	if err != nil || got.Status != domain.StatusDeleting || got.StatusMessage != "delete requested" {
		t.Fatalf("after a direct delete: %+v, %v; want the row deleting", got, err)
	}
	if got.Attempts != 0 || got.LastError != "" || got.NextAttemptAt != nil {
		t.Fatalf("after a direct delete: attempts %d, last error %q, next attempt %v; want a fresh retry budget", got.Attempts, got.LastError, got.NextAttemptAt)
	}
	if ids := changesSince(t, st, seq); len(ids) != 1 || ids[0] != r.ID {
		t.Fatalf("changes logged by the direct delete = %v, want [%s]", ids, r.ID)
	}

	seq = latestSeq(t, st)
	tx, err := st.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SET LOCAL berth.finalizing = 'on'`); err != nil {
		t.Fatal(err)
	}
	if tag, err := tx.Exec(ctx, `DELETE FROM resources WHERE id = $1`, r.ID); err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("finalizing delete: %v, %v rows", err, tag.RowsAffected())
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetResource(ctx, r.ID); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("after a finalizing delete: err = %v, want ErrNotFound", err)
	}
	if ids := changesSince(t, st, seq); len(ids) != 1 || ids[0] != r.ID {
		t.Fatalf("changes logged by the row's removal = %v, want [%s]", ids, r.ID)
	}
}
