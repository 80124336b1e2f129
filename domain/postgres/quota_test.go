package postgres_test

import (
	"errors"
	"testing"

	"github.com/berth-dev/berth/domain"
)

// Quotas are the agent's to write (the client contract of 0012): a client role reads them
// and its usage, and can neither write a quota nor an admission.
func TestClientRoleReadsQuotasOnly(t *testing.T) {
	ctx := testContext(t)
	agent, dbURL := migratedAt(t)
	role, clientURL := clientRole(t, agent, dbURL)
	if err := agent.GrantClientRole(ctx, role); err != nil {
		t.Fatal(err)
	}
	five := int64(5)
	if _, err := agent.SetQuota(ctx, domain.QuotaChange{Owner: "acme", Provisioner: "pool", Resources: domain.QuotaLimit{Set: true, Max: &five}}); err != nil {
		t.Fatal(err)
	}
	client := openAs(t, clientURL)
	quotas, err := client.ListQuotas(ctx, domain.QuotaFilter{})
	if err != nil || len(quotas) != 1 {
		t.Fatalf("list as a client = %+v, %v; want the quota", quotas, err)
	}
	_, err = client.SetQuota(ctx, domain.QuotaChange{Owner: "acme", Provisioner: "pool", Resources: domain.QuotaLimit{Set: true}})
	if !errors.Is(err, domain.ErrForbidden) {
		t.Fatalf("set as a client: %v, want ErrForbidden", err)
	}
	wantForbidden(t, "set", err, "only the Berth agent's role")
	if err := client.RemoveQuota(ctx, "acme", "pool"); !errors.Is(err, domain.ErrForbidden) {
		t.Fatalf("remove as a client: %v, want ErrForbidden", err)
	}

	r, err := client.CreateResource(ctx, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: "mine", Owner: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.Pool().Exec(ctx, `UPDATE resources SET admitted_provisioner = 'pool', admitted_units = 0 WHERE id = $1`, r.ID)
	wantForbidden(t, "admit", err, "written by the Berth agent only")
	_, err = client.Pool().Exec(ctx, `INSERT INTO resources (type, name, owner, admitted_units) VALUES ('runtime', 'sneaky', 'acme', 0)`)
	wantForbidden(t, "insert an admission", err, "written by the Berth agent only")
	// An admission is refused before any other agent column written with it.
	_, err = client.Pool().Exec(ctx, `UPDATE resources SET status = 'ready', admitted_units = 1 WHERE id = $1`, r.ID)
	wantForbidden(t, "admit with a status", err, `columns "admitted_provisioner" and "admitted_units"`)
	// The client's other writes are untouched by the admission's trigger.
	if _, err := client.UpdateResourceArgs(ctx, r.ID, map[string]any{"slots": 2}); err != nil {
		t.Fatalf("update args as a client: %v", err)
	}
}

// With owner isolation on, a client role sees the quotas of its owners only.
func TestOwnerIsolationCoversQuotas(t *testing.T) {
	ctx := testContext(t)
	agent, dbURL := migratedAt(t)
	role, clientURL := clientRole(t, agent, dbURL)
	if err := agent.GrantClientRole(ctx, role); err != nil {
		t.Fatal(err)
	}
	if err := agent.GrantOwners(ctx, role, []string{"acme"}); err != nil {
		t.Fatal(err)
	}
	one := int64(1)
	for _, owner := range []string{"acme", "zed"} {
		if _, err := agent.SetQuota(ctx, domain.QuotaChange{Owner: owner, Provisioner: "pool", Resources: domain.QuotaLimit{Set: true, Max: &one}}); err != nil {
			t.Fatal(err)
		}
	}
	client := openAs(t, clientURL)
	if quotas, err := client.ListQuotas(ctx, domain.QuotaFilter{}); err != nil || len(quotas) != 2 {
		t.Fatalf("isolation off: a client lists %+v, %v; want both quotas", quotas, err)
	}
	if err := agent.SetOwnerIsolation(ctx, true); err != nil {
		t.Fatal(err)
	}
	quotas, err := client.ListQuotas(ctx, domain.QuotaFilter{})
	if err != nil || len(quotas) != 1 || quotas[0].Owner != "acme" {
		t.Fatalf("isolation on: a client lists %+v, %v; want acme's quota only", quotas, err)
	}
}
