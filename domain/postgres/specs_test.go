package postgres_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/berth-dev/berth/domain"
)

func TestApplyProvisionerSpecBumpsOnlyOnChange(t *testing.T) {
	st := newState(t)
	ctx := testContext(t)
	ready := provisioned(t, st, "web")
	mustExec(t, st, `UPDATE resources SET provisioner = 'pool' WHERE id = $1`, ready.ID)
	failing := mustCreate(t, st, runtime("failing"))
	mustExec(t, st, `UPDATE resources SET provisioner = 'pool', status = 'error', attempts = 3, last_error = 'boom' WHERE id = $1`, failing.ID)
	leaving := mustCreate(t, st, runtime("leaving"))
	mustExec(t, st, `UPDATE resources SET provisioner = 'pool' WHERE id = $1`, leaving.ID)
	if _, err := st.RequestDelete(ctx, leaving.ID); err != nil {
		t.Fatal(err)
	}
	other := mustCreate(t, st, runtime("elsewhere"))
	mustExec(t, st, `UPDATE resources SET provisioner = 'other' WHERE id = $1`, other.ID)

	apply := func(fingerprint string) int64 {
		t.Helper()
		n, err := st.ApplyProvisionerSpec(ctx, "pool", fingerprint)
		if err != nil {
			t.Fatalf("apply %s: %v", fingerprint, err)
		}
		return n
	}
	generation := func(id string) int64 {
		t.Helper()
		r, err := st.GetResource(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return r.Generation
	}

	if n := apply("v1"); n != 0 {
		t.Fatalf("first fingerprint bumped %d resources, want 0", n)
	}
	if n := apply("v1"); n != 0 {
		t.Fatalf("same fingerprint bumped %d resources, want 0", n)
	}
	seq := latestSeq(t, st)
	if n := apply("v2"); n != 2 {
		t.Fatalf("changed fingerprint bumped %d resources, want 2 (ready and failing; not deleting, not other provisioners)", n)
	}
	if g := generation(ready.ID); g != 2 {
		t.Fatalf("ready resource at generation %d, want 2", g)
	}
	if g := generation(other.ID); g != 1 {
		t.Fatalf("another provisioner's resource at generation %d, want 1", g)
	}
	if g := generation(leaving.ID); g != 1 {
		t.Fatalf("deleting resource at generation %d, want 1", g)
	}
	f, err := st.GetResource(ctx, failing.ID)
	if err != nil {
		t.Fatal(err)
	}
	if f.Attempts != 0 || f.LastError != "" {
		t.Fatalf("failing resource kept its retry bookkeeping after a spec change: attempts %d, last error %q", f.Attempts, f.LastError)
	}
	changed := changesSince(t, st, seq)
	slices.Sort(changed)
	want := []string{ready.ID, failing.ID}
	slices.Sort(want)
	if !slices.Equal(changed, want) {
		t.Fatalf("change log after the spec change: %v, want %v", changed, want)
	}
	if n := apply("v2"); n != 0 {
		t.Fatalf("re-applying the new fingerprint bumped %d resources, want 0", n)
	}
}

func TestApplyProvisionerSpecNamesMissingFields(t *testing.T) {
	st := newState(t)
	var fe *domain.FieldError
	if _, err := st.ApplyProvisionerSpec(testContext(t), "", "x"); !errors.As(err, &fe) || fe.Field != "provisioner" {
		t.Fatalf("empty provisioner: %v", err)
	}
	if _, err := st.ApplyProvisionerSpec(testContext(t), "pool", ""); !errors.As(err, &fe) || fe.Field != "fingerprint" {
		t.Fatalf("empty fingerprint: %v", err)
	}
}
