package external

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/postgres"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/internal/pgtest"
)

// TestAnAnswerUnderAFencedLeaseIsRefusedOnRealStore: once another claim fenced the lease a
// call was made under, the broker's answer (which a broker that fences nothing still gives)
// is refused, naming the holder now, so that the provisioner keeps none of it.
func TestAnAnswerUnderAFencedLeaseIsRefusedOnRealStore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := postgres.Open(ctx, pgtest.New(t), postgres.PoolConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := st.CreateResource(ctx, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: "web", Owner: "alice", Args: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	claim := func(holder string) domain.Lease {
		t.Helper()
		c, err := st.ClaimResource(ctx, r.ID, holder, time.Minute)
		if err != nil {
			t.Fatalf("claim by %s: %v", holder, err)
		}
		return c.Lease
	}
	env := dial(t, &fakeBroker{}, environ.Deps{Resources: st}, map[string]any{"hibernate": true})
	res := func(lease domain.Lease) *environ.Resource {
		return &environ.Resource{ID: r.ID, Type: domain.ResourceTypeRuntime, Lease: &lease}
	}
	refusedFor := func(what string, err error, holder string) {
		t.Helper()
		var held *domain.LeaseHeldError
		if !errors.As(err, &held) || held.Holder != holder {
			t.Fatalf("%s: err = %v; want the lease reported held by %s", what, err, holder)
		}
	}

	a := claim("agent-a")
	if _, err := env.Reconcile(ctx, res(a), widgetOpts()); err != nil {
		t.Fatalf("reconcile under a's lease: %v", err)
	}
	if err := st.ReleaseResource(ctx, r.ID, a); err != nil {
		t.Fatal(err)
	}
	b := claim("agent-b")
	_, err = env.Reconcile(ctx, res(a), widgetOpts())
	refusedFor("reconcile under a's fenced lease", err, "agent-b")
	refusedFor("deprovision under a's fenced lease", env.Deprovision(ctx, res(a)), "agent-b")
	_, err = env.(environ.Hibernator).Hibernate(ctx, res(a), widgetOpts())
	refusedFor("hibernate under a's fenced lease", err, "agent-b")
	if _, err := env.Reconcile(ctx, res(b), widgetOpts()); err != nil {
		t.Fatalf("reconcile under b's current lease: %v", err)
	}
}
