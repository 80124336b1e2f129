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

	// The first fingerprint of a provisioner retries only what failed for want of it.
	if n := apply("v1"); n != 1 {
		t.Fatalf("first fingerprint bumped %d resources, want 1 (the failed one)", n)
	}
	if f := mustGet(t, b, failing.ID); f.Generation != 2 || f.Attempts != 0 || f.LastError != "" {
		t.Fatalf("failed resource after its provisioner's first spec: generation %d, attempts %d, last error %q; want 2, 0, \"\"",
			f.Generation, f.Attempts, f.LastError)
	}
	mustExec(t, b, `UPDATE resources SET status = 'error', attempts = 3, last_error = 'boom' WHERE id = $1`, failing.ID)
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

// Marking a provisioner absent leaves its resources as they are; putting it back with the
// same spec reconciles them, so those that failed while it was missing are retried.
func testProvisionerBackFromAbsentBumps(t *testing.T, b *Backend) {
	ctx := testContext(t)
	ready := provisioned(t, b, "web")
	mustExec(t, b, `UPDATE resources SET provisioner = 'pool' WHERE id = $1`, ready.ID)
	leaving := mustCreate(t, b, runtime("leaving"))
	mustExec(t, b, `UPDATE resources SET provisioner = 'pool' WHERE id = $1`, leaving.ID)
	if _, err := b.RequestDelete(ctx, leaving.ID); err != nil {
		t.Fatal(err)
	}
	apply := func(provisioner, fingerprint string) int64 {
		t.Helper()
		n, err := b.ApplyProvisionerSpec(ctx, provisioner, fingerprint)
		if err != nil {
			t.Fatalf("apply %s %s: %v", provisioner, fingerprint, err)
		}
		return n
	}
	apply("pool", "v1")
	// It fails while its provisioner is missing from the set.
	failed := mustCreate(t, b, runtime("failed"))
	mustExec(t, b, `UPDATE resources SET provisioner = 'pool', status = 'error', attempts = 1,
		last_error = 'provisioner "pool" is not in the provisioner set' WHERE id = $1`, failed.ID)
	seq := latestSeq(t, b)

	absent, err := b.MarkProvisionersAbsent(ctx, []string{"other"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(absent, []string{"pool"}) {
		t.Fatalf("marked absent: %v, want [pool]", absent)
	}
	if r := mustGet(t, b, ready.ID); r.Generation != 1 || r.Status != domain.StatusReady {
		t.Fatalf("marking its provisioner absent moved a ready resource to generation %d, status %s", r.Generation, r.Status)
	}
	if changed := changesSince(t, b, seq); len(changed) != 0 {
		t.Fatalf("marking a provisioner absent logged changes to %v, want none", changed)
	}

	if n := apply("pool", "v1"); n != 2 {
		t.Fatalf("putting the provisioner back with the same spec bumped %d resources, want 2 (ready and failed; not deleting)", n)
	}
	if g := mustGet(t, b, ready.ID).Generation; g != 2 {
		t.Fatalf("ready resource at generation %d, want 2", g)
	}
	if f := mustGet(t, b, failed.ID); f.Generation != 2 || f.Attempts != 0 || f.LastError != "" {
		t.Fatalf("failed resource not rescheduled: generation %d, attempts %d, last error %q", f.Generation, f.Attempts, f.LastError)
	}
	if g := mustGet(t, b, leaving.ID).Generation; g != 1 {
		t.Fatalf("deleting resource at generation %d, want 1", g)
	}
	if n := apply("pool", "v1"); n != 0 {
		t.Fatalf("re-applying the spec once back bumped %d resources, want 0", n)
	}
}

// Only recorded provisioners outside the set are marked, once; those in it keep their spec.
func testMarkProvisionersAbsentSparesThePresent(t *testing.T, b *Backend) {
	ctx := testContext(t)
	for _, name := range []string{"a", "b", "c"} {
		r := provisioned(t, b, name)
		mustExec(t, b, `UPDATE resources SET provisioner = $2 WHERE id = $1`, r.ID, name)
		if _, err := b.ApplyProvisionerSpec(ctx, name, name+"-v1"); err != nil {
			t.Fatal(err)
		}
	}
	never := provisioned(t, b, "never")
	mustExec(t, b, `UPDATE resources SET provisioner = 'never' WHERE id = $1`, never.ID)
	seq := latestSeq(t, b)

	mark := func(present []string) []string {
		t.Helper()
		absent, err := b.MarkProvisionersAbsent(ctx, present)
		if err != nil {
			t.Fatalf("mark absent all but %v: %v", present, err)
		}
		return absent
	}
	if absent := mark([]string{"a", "elsewhere"}); !slices.Equal(absent, []string{"b", "c"}) {
		t.Fatalf("marked absent: %v, want [b c]", absent)
	}
	if absent := mark([]string{"a"}); len(absent) != 0 {
		t.Fatalf("marking again reported %v, want none: they were absent already", absent)
	}
	if changed := changesSince(t, b, seq); len(changed) != 0 {
		t.Fatalf("marking provisioners absent logged changes to %v, want none", changed)
	}
	if n, err := b.ApplyProvisionerSpec(ctx, "a", "a-v1"); err != nil || n != 0 {
		t.Fatalf("a present provisioner's spec was touched: re-applying it bumped %d (%v), want 0", n, err)
	}
	if n, err := b.ApplyProvisionerSpec(ctx, "never", "never-v1"); err != nil || n != 0 {
		t.Fatalf("first spec of a provisioner never recorded bumped %d (%v), want 0", n, err)
	}
	if absent := mark(nil); !slices.Equal(absent, []string{"a", "never"}) {
		t.Fatalf("marked absent with an empty set: %v, want [a never]", absent)
	}
}
