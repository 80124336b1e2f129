package statetest

import (
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/berth-dev/berth/domain"
)

func testApplyProvisionerSpecBumpsOnlyOnChange(t *testing.T, b *Backend) {
	ctx := testContext(t)
	ready := provisioned(t, b, "web")
	mustExec(t, b, `UPDATE resources SET provisioner = 'pool' WHERE id = $1`, ready.ID)
	failing := mustCreate(t, b, runtime("failing"))
	mustExec(t, b, `UPDATE resources SET provisioner = 'pool', status = 'error', attempts = 3, last_error = 'boom' WHERE id = $1`, failing.ID)
	leaving := mustCreate(t, b, runtime("leaving"))
	mustExec(t, b, `UPDATE resources SET provisioner = 'pool' WHERE id = $1`, leaving.ID)
	if _, err := b.RequestDelete(ctx, leaving.ID); err != nil {
		t.Fatal(err)
	}
	other := mustCreate(t, b, runtime("elsewhere"))
	mustExec(t, b, `UPDATE resources SET provisioner = 'other' WHERE id = $1`, other.ID)

	apply := func(fingerprint string) int64 {
		t.Helper()
		n, err := b.ApplyProvisionerSpec(ctx, "pool", fingerprint)
		if err != nil {
			t.Fatalf("apply %s: %v", fingerprint, err)
		}
		return n
	}

	if n := apply("v1"); n != 0 {
		t.Fatalf("first fingerprint bumped %d resources, want 0", n)
	}
	if n := apply("v1"); n != 0 {
		t.Fatalf("same fingerprint bumped %d resources, want 0", n)
	}
	seq := latestSeq(t, b)
	if n := apply("v2"); n != 2 {
		t.Fatalf("changed fingerprint bumped %d resources, want 2 (ready and failing; not deleting, not other provisioners)", n)
	}
	if g := mustGet(t, b, ready.ID).Generation; g != 2 {
		t.Fatalf("ready resource at generation %d, want 2", g)
	}
	if g := mustGet(t, b, other.ID).Generation; g != 1 {
		t.Fatalf("another provisioner's resource at generation %d, want 1", g)
	}
	if g := mustGet(t, b, leaving.ID).Generation; g != 1 {
		t.Fatalf("deleting resource at generation %d, want 1", g)
	}
	if f := mustGet(t, b, failing.ID); f.Attempts != 0 || f.LastError != "" {
		t.Fatalf("failing resource kept its retry bookkeeping after a spec change: attempts %d, last error %q", f.Attempts, f.LastError)
	}
	changed := changesSince(t, b, seq)
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

// Agents that start together with the same new spec move the resources to one new
// generation, not one each.
func testApplyProvisionerSpecOnceForAgentsStartingTogether(t *testing.T, b *Backend) {
	ctx := testContext(t)
	var ids []string
	for _, name := range []string{"a", "b", "c"} {
		r := provisioned(t, b, name)
		mustExec(t, b, `UPDATE resources SET provisioner = 'pool' WHERE id = $1`, r.ID)
		ids = append(ids, r.ID)
	}
	if _, err := b.ApplyProvisionerSpec(ctx, "pool", "v1"); err != nil {
		t.Fatal(err)
	}
	agents := []domain.ProvisionerSpecStore{b, b.Reopen(t), b.Reopen(t)}
	bumped := make([]int64, len(agents))
	errs := make([]error, len(agents))
	var wg sync.WaitGroup
	for i, agent := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bumped[i], errs[i] = agent.ApplyProvisionerSpec(ctx, "pool", "v2")
		}()
	}
	wg.Wait()
	var total int64
	for i := range agents {
		if errs[i] != nil {
			t.Fatalf("agent %d: %v", i, errs[i])
		}
		total += bumped[i]
	}
	if total != int64(len(ids)) {
		t.Fatalf("agents bumped %v resources, want %d in all", bumped, len(ids))
	}
	for _, id := range ids {
		if g := mustGet(t, b, id).Generation; g != 2 {
			t.Errorf("resource %s at generation %d, want 2", id, g)
		}
	}
}

func testApplyProvisionerSpecNamesMissingFields(t *testing.T, b *Backend) {
	var fe *domain.FieldError
	if _, err := b.ApplyProvisionerSpec(testContext(t), "", "x"); !errors.As(err, &fe) || fe.Field != "provisioner" {
		t.Fatalf("empty provisioner: %v", err)
	}
	if _, err := b.ApplyProvisionerSpec(testContext(t), "pool", ""); !errors.As(err, &fe) || fe.Field != "fingerprint" {
		t.Fatalf("empty fingerprint: %v", err)
	}
}
