package statetest

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"

	"github.com/berth-dev/berth/domain"
)

// testChangeLabelsMergesInOneWrite checks ChangeLabels' rules: it merges into the row's
// labels, is recorded as SetLabels is, changes nothing when the labels are as asked, and
// refuses what Service.Label refused.
func testChangeLabelsMergesInOneWrite(t *testing.T, b *Backend) {
	ctx := testContext(t)
	nr := runtime("labelled")
	nr.Labels = map[string]string{"team": "data", "tier": "dev"}
	r := mustCreate(t, b, nr)
	events := latestEvent(t, b)
	got, err := b.ChangeLabels(ctx, r.ID, map[string]string{"tier": "prod", "env": "eu"}, []string{"team"})
	if want := map[string]string{"tier": "prod", "env": "eu"}; err != nil || !maps.Equal(got.Labels, want) {
		t.Fatalf("ChangeLabels = %v, %v; want labels %v", got.Labels, err, want)
	}
	if got.Generation != r.Generation+1 {
		t.Errorf("generation after a label change = %d; want %d", got.Generation, r.Generation+1)
	}
	if want := []string{"control pending labels changed: env=eu, tier=prod"}; !equalStrings(eventsSince(t, b, events), want) {
		t.Errorf("events of a label change = %q; want %q", eventsSince(t, b, events), want)
	}

	events = latestEvent(t, b)
	same, err := b.ChangeLabels(ctx, r.ID, map[string]string{"env": "eu"}, nil)
	if err != nil || same.Generation != got.Generation || !maps.Equal(same.Labels, got.Labels) {
		t.Errorf("ChangeLabels to the labels it has = %+v, %v; want the row unchanged", same, err)
	}
	for _, refused := range []struct {
		name   string
		set    map[string]string
		remove []string
		msg    string
	}{
		{"remove a label it lacks", nil, []string{"team"}, `the resource has no label "team" (its labels: env, tier)`},
		{"set and remove", map[string]string{"env": "us"}, []string{"env"}, `"env" is both set and removed`},
		{"bad key", map[string]string{"a/b": "c"}, nil, `key "a/b" has a prefix`},
		{"too many", manyLabels(domain.MaxLabels - 1), nil, fmt.Sprintf("would have %d labels", domain.MaxLabels+1)},
	} {
		_, err := b.ChangeLabels(ctx, r.ID, refused.set, refused.remove)
		var fe *domain.FieldError
		if !errors.As(err, &fe) || fe.Field != "labels" || !strings.Contains(err.Error(), refused.msg) {
			t.Errorf("%s: err = %v; want a labels FieldError saying %q", refused.name, err, refused.msg)
		}
	}
	if after := mustGet(t, b, r.ID); after.Generation != got.Generation || !maps.Equal(after.Labels, got.Labels) {
		t.Errorf("refused label changes left %v at generation %d; want %v at %d", after.Labels, after.Generation, got.Labels, got.Generation)
	}
	if got := eventsSince(t, b, events); len(got) != 0 {
		t.Errorf("label changes that changed nothing recorded %q", got)
	}

	if _, err := b.RequestDelete(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ChangeLabels(ctx, r.ID, map[string]string{"team": "ops"}, nil); !errors.Is(err, domain.ErrConflict) {
		t.Errorf("label a resource being deleted: err = %v; want ErrConflict", err)
	}
	if _, err := b.ChangeLabels(ctx, missingID, map[string]string{"a": "b"}, nil); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("label a missing resource: err = %v; want ErrNotFound", err)
	}
}

// manyLabels returns n labels none of the tests' resources has.
func manyLabels(n int) map[string]string {
	out := make(map[string]string, n)
	for i := range n {
		out[fmt.Sprintf("k%d", i)] = "v"
	}
	return out
}

func equalStrings(a, b []string) bool {
	return len(a) == len(b) && strings.Join(a, "\n") == strings.Join(b, "\n")
}

// labelRounds is how many times two label changes are made at once.
const labelRounds = 20

// testConcurrentLabelChangesAllLand makes two label changes of different keys at once, from
// two stores as two `berth resource label` commands would, labelRounds times: every label
// lands, and each change is one generation and one control event.
func testConcurrentLabelChangesAllLand(t *testing.T, b *Backend) {
	ctx := testContext(t)
	other := b.Reopen(t)
	r := mustCreate(t, b, runtime("raced"))
	events := latestEvent(t, b)
	want := map[string]string{}
	for round := range labelRounds {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, st := range []domain.ResourceStore{b, other} {
			key := fmt.Sprintf("r%d-%d", round, i)
			want[key] = "v"
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = st.ChangeLabels(ctx, r.ID, map[string]string{key: "v"}, nil)
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	got := mustGet(t, b, r.ID)
	if !maps.Equal(got.Labels, want) {
		t.Errorf("after %d rounds of two label changes at once the labels are %v; want all %d: %v", labelRounds, got.Labels, len(want), want)
	}
	if got.Generation != r.Generation+2*labelRounds {
		t.Errorf("generation = %d; want %d (one per change)", got.Generation, r.Generation+2*labelRounds)
	}
	if n := len(eventsSince(t, b, events)); n != 2*labelRounds {
		t.Errorf("%d events recorded; want %d (one per change)", n, 2*labelRounds)
	}
}
