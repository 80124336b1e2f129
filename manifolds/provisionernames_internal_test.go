package manifolds

import (
	"context"
	"slices"
	"testing"

	"github.com/juju/worker/v4/dependency"
	dt "github.com/juju/worker/v4/dependency/testing"

	"github.com/berth-dev/berth/environ"
)

// The names the membership worker records follow every set the environs build, and none
// are known before the environs start.
func TestProvisionerNamesFollowTheEnvirons(t *testing.T) {
	p := new(provisionerNames)
	m := p.manifold()
	if _, err := m.Start(context.Background(), dt.StubGetter(map[string]any{EnvironsName: dependency.ErrMissing})); err != dependency.ErrMissing {
		t.Fatalf("start without the environs: %v, want ErrMissing", err)
	}
	if got := p.Names(); len(got) != 0 {
		t.Fatalf("names before the environs started = %v, want none", got)
	}
	for _, names := range [][]string{{"static", "kube"}, {"static"}} {
		set := &environ.Set{Environs: map[string]environ.Environ{}}
		for _, n := range names {
			set.Environs[n] = nil
		}
		w, err := m.Start(context.Background(), dt.StubGetter(map[string]any{EnvironsName: set}))
		if err != nil {
			t.Fatalf("start: %v", err)
		}
		want := slices.Sorted(slices.Values(names))
		if got := p.Names(); !slices.Equal(got, want) {
			t.Fatalf("names = %v, want %v", got, want)
		}
		w.Kill()
		if err := w.Wait(); err != nil {
			t.Fatalf("stop: %v", err)
		}
	}
}
