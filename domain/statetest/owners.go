package statetest

import (
	"errors"
	"testing"

	jujuerrors "github.com/juju/errors"

	"github.com/berth-dev/berth/domain"
)

// The owner suites register themselves here rather than in the list of statetest.go, so
// that the fairness work stays in files of its own.
func init() {
	tests = append(tests,
		struct {
			name string
			run  func(t *testing.T, b *Backend)
		}{"OwnerPolicies", testOwnerPolicies},
		struct {
			name string
			run  func(t *testing.T, b *Backend)
		}{"OwnerPolicyValidation", testOwnerPolicyValidation},
		struct {
			name string
			run  func(t *testing.T, b *Backend)
		}{"OwnerSummaries", testOwnerSummaries},
		struct {
			name string
			run  func(t *testing.T, b *Backend)
		}{"ResourceOwners", testResourceOwners},
		struct {
			name string
			run  func(t *testing.T, b *Backend)
		}{"ChangesCarryOwners", testChangesCarryOwners},
	)
}

func testOwnerPolicies(t *testing.T, b *Backend) {
	ctx := testContext(t)
	if _, err := b.OwnerPolicy(ctx, "alice"); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("policy of an owner with none: %v, want not found", err)
	}
	set, err := b.SetOwnerPolicy(ctx, domain.OwnerPolicy{Owner: "alice", Weight: 3, Class: "gold"})
	if err != nil {
		t.Fatalf("set: %v", err)
	}
	if set.Owner != "alice" || set.Weight != 3 || set.Class != "gold" || set.UpdatedAt.IsZero() {
		t.Fatalf("set returned %+v", set)
	}
	if _, err := b.SetOwnerPolicy(ctx, domain.OwnerPolicy{Owner: "bob", Weight: 1}); err != nil {
		t.Fatalf("set bob: %v", err)
	}
	replaced, err := b.SetOwnerPolicy(ctx, domain.OwnerPolicy{Owner: "alice", Weight: 1000, Class: ""})
	if err != nil {
		t.Fatalf("replace: %v", err)
	}
	got, err := b.OwnerPolicy(ctx, "alice")
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if got.Weight != 1000 || got.Class != "" || !got.UpdatedAt.Equal(replaced.UpdatedAt) {
		t.Fatalf("get after replace: %+v, want weight 1000, no class, updated at %v", got, replaced.UpdatedAt)
	}
	list, err := b.ListOwnerPolicies(ctx)
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if len(list) != 2 || list[0].Owner != "alice" || list[1].Owner != "bob" {
		t.Fatalf("list: %+v, want alice then bob", list)
	}
	if w := domain.OwnerWeights(list); w["alice"] != 1000 || w["bob"] != 1 {
		t.Fatalf("weights %v", w)
	}
	if err := b.RemoveOwnerPolicy(ctx, "alice"); err != nil {
		t.Fatalf("remove: %v", err)
	}
	if err := b.RemoveOwnerPolicy(ctx, "alice"); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("remove again: %v, want not found", err)
	}
	if _, err := b.OwnerPolicy(ctx, "alice"); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("policy after remove: %v, want not found", err)
	}
	// Another State (a CLI command) sees the agent's policies.
	if list, err := b.Reopen(t).ListOwnerPolicies(ctx); err != nil || len(list) != 1 || list[0].Owner != "bob" {
		t.Fatalf("list from another state: %+v, %v", list, err)
	}
}

func testOwnerPolicyValidation(t *testing.T, b *Backend) {
	ctx := testContext(t)
	for _, tc := range []struct {
		p     domain.OwnerPolicy
		field string
	}{
		{domain.OwnerPolicy{Owner: "", Weight: 1}, "owner"},
		{domain.OwnerPolicy{Owner: "alice", Weight: 0}, "weight"},
		{domain.OwnerPolicy{Owner: "alice", Weight: -2}, "weight"},
		{domain.OwnerPolicy{Owner: "alice", Weight: 1001}, "weight"},
		{domain.OwnerPolicy{Owner: "alice", Weight: 1, Class: "Gold"}, "class"},
		{domain.OwnerPolicy{Owner: "alice", Weight: 1, Class: "a_b"}, "class"},
		{domain.OwnerPolicy{Owner: "alice", Weight: 1, Class: "abcdefghijklmnopqrstuvwxyz0123456"}, "class"},
	} {
		_, err := b.SetOwnerPolicy(ctx, tc.p)
		var fe *domain.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, jujuerrors.NotValid) {
			t.Errorf("set %+v: %v, want a field error on %s", tc.p, err, tc.field)
		}
	}
	// Direct SQL meets the same rules.
	for _, q := range []string{
		`INSERT INTO owner_policies (owner, weight) VALUES ('x', 0)`,
		`INSERT INTO owner_policies (owner, weight) VALUES ('x', 1001)`,
		`INSERT INTO owner_policies (owner, class) VALUES ('x', 'Upper')`,
		`INSERT INTO owner_policies (owner) VALUES ('')`,
	} {
		if _, err := b.Exec(ctx, q); err == nil {
			t.Errorf("%s: accepted", q)
		}
	}
	if list, err := b.ListOwnerPolicies(ctx); err != nil || len(list) != 0 {
		t.Fatalf("after refused writes: %+v, %v", list, err)
	}
}

func testOwnerSummaries(t *testing.T, b *Backend) {
	ctx := testContext(t)
	a1 := mustCreate(t, b, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: "a1", Owner: "alice"})
	mustCreate(t, b, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: "a2", Owner: "alice"})
	mustCreate(t, b, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: "d1"})
	mustExec(t, b, `UPDATE resources SET paused = TRUE WHERE id = $1`, a1.ID)
	if _, err := b.SetOwnerPolicy(ctx, domain.OwnerPolicy{Owner: "carol", Weight: 5, Class: "big"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.SetOwnerPolicy(ctx, domain.OwnerPolicy{Owner: "alice", Weight: 2}); err != nil {
		t.Fatal(err)
	}
	got, err := b.OwnerSummaries(ctx)
	if err != nil {
		t.Fatalf("summaries: %v", err)
	}
	type row struct {
		owner             string
		weight            int
		class             string
		hasPolicy         bool
		resources, queued int
	}
	var rows []row
	for _, o := range got {
		rows = append(rows, row{o.Owner, o.Weight, o.Class, o.HasPolicy, o.Resources, o.Queued})
		if o.HasPolicy == o.UpdatedAt.IsZero() {
			t.Errorf("%q: has policy %v, updated at %v", o.Owner, o.HasPolicy, o.UpdatedAt)
		}
	}
	want := []row{
		{"", 1, "", false, 1, 1},
		{"alice", 2, "", true, 2, 1},
		{"carol", 5, "big", true, 0, 0},
	}
	if len(rows) != len(want) {
		t.Fatalf("summaries %+v, want %+v", rows, want)
	}
	for i := range want {
		if rows[i] != want[i] {
			t.Errorf("summary %d: %+v, want %+v", i, rows[i], want[i])
		}
	}
}

func testResourceOwners(t *testing.T, b *Backend) {
	ctx := testContext(t)
	a := mustCreate(t, b, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: "a", Owner: "alice"})
	d := mustCreate(t, b, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: "d"})
	got, err := b.ResourceOwners(ctx, []string{a.ID, d.ID, missingID, "not-an-id"})
	if err != nil {
		t.Fatalf("owners: %v", err)
	}
	if len(got) != 2 || got[a.ID] != "alice" || got[d.ID] != "" {
		t.Fatalf("owners %v, want %s: alice and %s: the default owner, nothing else", got, a.ID, d.ID)
	}
	if got, err := b.ResourceOwners(ctx, nil); err != nil || len(got) != 0 {
		t.Fatalf("owners of none: %v, %v", got, err)
	}
}

func testChangesCarryOwners(t *testing.T, b *Backend) {
	ctx := testContext(t)
	from, err := b.LatestChangeSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a := mustCreate(t, b, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: "a", Owner: "alice"})
	d := mustCreate(t, b, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: "d"})
	changes, err := b.ChangesAfter(ctx, from, 0)
	if err != nil {
		t.Fatal(err)
	}
	owners := map[string]string{}
	var seqs []int64
	for _, c := range changes {
		owners[c.ResourceID] = c.Owner
		seqs = append(seqs, c.Seq)
	}
	if len(owners) != 2 || owners[a.ID] != "alice" || owners[d.ID] != "" {
		t.Fatalf("changes %+v: want %s of alice and %s of the default owner", changes, a.ID, d.ID)
	}
	in, err := b.ChangesIn(ctx, seqs)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range in {
		if c.Owner != owners[c.ResourceID] {
			t.Errorf("ChangesIn: %+v, want owner %q", c, owners[c.ResourceID])
		}
	}

	// A removal's entry carries the removed row's owner, which no read of resources can give.
	from = changes[len(changes)-1].Seq
	if _, err := b.UpdateResourceArgs(ctx, a.ID, map[string]any{"v": 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.RequestDelete(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if err := b.FinalizeDelete(ctx, a.ID, mustClaim(t, b, a.ID, "agent-a")); err != nil {
		t.Fatal(err)
	}
	changes, err = b.ChangesAfter(ctx, from, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 3 || changes[0].Owner != "alice" || changes[1].Owner != "alice" || changes[2].Owner != "alice" {
		t.Fatalf("changes of the update, the delete and the removal %+v: want three of alice's", changes)
	}
	expectChangesOwned(t, b)

	// An entry written without an owner, as every entry was before the owner was logged,
	// reads its resource's owner now, and "" once the row is gone.
	from = changes[len(changes)-1].Seq
	e := mustCreate(t, b, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: "e", Owner: "erin"})
	mustExec(t, b, `INSERT INTO change_log (resource_id) VALUES ($1)`, e.ID)
	mustExec(t, b, `INSERT INTO change_log (resource_id) VALUES ($1)`, a.ID)
	changes, err = b.ChangesAfter(ctx, from, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 3 || changes[1].ResourceID != e.ID || changes[1].Owner != "erin" ||
		changes[2].ResourceID != a.ID || changes[2].Owner != "" {
		t.Fatalf("changes %+v: want %s's creation and an entry without owner of erin's, then one of removed %s of ''", changes, e.ID, a.ID)
	}
}

// expectChangesOwned fails t unless every change-log entry was written with its owner, so
// that no read has to look it up.
func expectChangesOwned(t *testing.T, b *Backend) {
	t.Helper()
	var unowned int
	if err := b.QueryRow(testContext(t), `SELECT count(*) FROM change_log WHERE owner IS NULL`).Scan(&unowned); err != nil || unowned != 0 {
		t.Errorf("change-log entries written without their owner: %d, %v; want none", unowned, err)
	}
}
