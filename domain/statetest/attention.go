package statetest

// What the agent is given to do about a controlled resource: the attention and health
// lists leave paused rows out, and hibernating and waking are work until they are done.

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
)

// attentionIDs reads every page of ResourcesNeedingAttention.
func attentionIDs(t *testing.T, st domain.ReconcileStore) []string {
	t.Helper()
	var ids []string
	for after := ""; ; {
		page, err := st.ResourcesNeedingAttention(testContext(t), after, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range page {
			ids = append(ids, a.ID)
		}
		if len(page) < 100 {
			return ids
		}
		after = page[len(page)-1].ID
	}
}

func checkableIDs(t *testing.T, st domain.HealthStore) []string {
	t.Helper()
	page, err := st.ListCheckable(testContext(t), "", 100, "agent-a")
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(page))
	for i, r := range page {
		ids[i] = r.ID
	}
	return ids
}

var defaultStart = domain.ProvisioningStart{Provisioner: "pool", Types: []domain.ResourceType{domain.ResourceTypeRuntime}}

// The agent does nothing to a paused resource: it needs no attention (not even to be
// deleted), is not started by a claim, nor health-checked, nor handed over from a dead agent
// or an overdue retry, until it is resumed.
func testPausedResourcesAreLeftAlone(t *testing.T, b *Backend) {
	ctx := testContext(t)
	pending := mustCreate(t, b, runtime("pending"))
	ready := provisioned(t, b, "ready")
	deleting := provisioned(t, b, "deleting")
	overdue := mustCreate(t, b, runtime("overdue"))
	scheduleRetry(t, b, overdue, "a", time.Now().Add(-time.Hour), false)
	registerWith(t, b, "dead", 15*time.Second, time.Hour)
	orphaned := mustCreate(t, b, runtime("orphaned"))
	if _, err := b.ClaimResource(ctx, orphaned.ID, "dead", ttl); err != nil {
		t.Fatal(err)
	}
	setHeartbeatAgo(t, b, "dead", time.Minute)
	if _, err := b.RequestDelete(ctx, deleting.ID); err != nil {
		t.Fatal(err)
	}
	all := []string{pending.ID, ready.ID, deleting.ID, overdue.ID, orphaned.ID}
	for _, id := range all {
		if _, err := b.SetPaused(ctx, id, true); err != nil {
			t.Fatal(err)
		}
	}
	// Args changed meanwhile are recorded, and wait for the resume too.
	if _, err := b.UpdateResourceArgs(ctx, ready.ID, map[string]any{"slots": 2}); err != nil {
		t.Fatal(err)
	}

	if got := attentionIDs(t, b); len(got) != 0 {
		t.Errorf("attention while paused: %v; want none", got)
	}
	if got, err := b.UnclaimedResources(ctx, all); err != nil || len(got) != 0 {
		t.Errorf("unclaimed while paused: %v, %v; want none", got, err)
	}
	if got := mustOverdue(t, b, 0, 10); len(got) != 0 {
		t.Errorf("overdue while paused: %v; want none", got)
	}
	if got := mustDeadAgentsResources(t, b); len(got) != 0 {
		t.Errorf("resources of dead agents while paused: %v; want none", got)
	}
	mustExec(t, b, `UPDATE resources SET observed_generation = generation WHERE id = $1`, ready.ID)
	if got := checkableIDs(t, b); len(got) != 0 {
		t.Errorf("checkable while paused: %v; want none", got)
	}
	c, err := b.ClaimAndStart(ctx, pending.ID, "agent-a", ttl, defaultStart)
	if err != nil {
		t.Fatal(err)
	}
	if c.Started || c.Resource.Status != domain.StatusPending {
		t.Errorf("claim and start of a paused resource: started %v, status %s; want it claimed only", c.Started, c.Resource.Status)
	}
	if err := b.ReleaseResource(ctx, pending.ID, c.Lease); err != nil {
		t.Fatal(err)
	}

	for _, id := range all {
		if _, err := b.SetPaused(ctx, id, false); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{pending.ID, deleting.ID, overdue.ID, orphaned.ID}
	slices.Sort(want)
	if got := attentionIDs(t, b); !slices.Equal(got, want) {
		t.Errorf("attention once resumed: %v; want %v", got, want)
	}
	if got := checkableIDs(t, b); !slices.Equal(got, []string{ready.ID}) {
		t.Errorf("checkable once resumed: %v; want %v", got, []string{ready.ID})
	}
	if got := mustDeadAgentsResources(t, b); !slices.Equal(got, []string{orphaned.ID}) {
		t.Errorf("resources of dead agents once resumed: %v; want %v", got, []string{orphaned.ID})
	}
	if got := mustOverdue(t, b, 0, 10); !slices.Equal(got, []string{overdue.ID}) {
		t.Errorf("overdue once resumed: %v; want %v", got, []string{overdue.ID})
	}
	if c, err := b.ClaimAndStart(ctx, pending.ID, "agent-a", ttl, defaultStart); err != nil || !c.Started {
		t.Errorf("claim and start once resumed: started %v, %v; want it started", c.Started, err)
	}
}

// Hibernating and waking are work for the agent until the status says they are done; a
// hibernated resource needs nothing, not even for args changed meanwhile (applied on wake),
// and a claim does not start a resource asked to hibernate.
func testHibernationNeedsAttention(t *testing.T, b *Backend) {
	ctx := testContext(t)
	cases := []struct {
		name      string
		status    domain.Status
		hibernate bool
		newArgs   bool
		attention bool
	}{
		{"ready, asked to hibernate", domain.StatusReady, true, false, true},
		{"hibernating", domain.StatusHibernating, true, false, true},
		{"hibernated", domain.StatusHibernated, true, false, false},
		{"hibernated, args changed", domain.StatusHibernated, true, true, false},
		{"hibernated, asked to wake", domain.StatusHibernated, false, false, true},
		{"hibernating, asked to wake", domain.StatusHibernating, false, false, true},
		{"error, asked to hibernate", domain.StatusError, true, false, true},
		{"ready", domain.StatusReady, false, false, false},
	}
	var want []string
	names := map[string]string{}
	for _, tc := range cases {
		r := provisioned(t, b, strings.ReplaceAll(tc.name, " ", "-"))
		names[r.ID] = tc.name
		mustExec(t, b, `UPDATE resources SET status = $2, hibernate = $3 WHERE id = $1`, r.ID, string(tc.status), tc.hibernate)
		if tc.newArgs {
			mustExec(t, b, `UPDATE resources SET args = '{"slots": 3}' WHERE id = $1`, r.ID)
		}
		if tc.attention {
			want = append(want, r.ID)
		}
		if got := mustGet(t, b, r.ID); got.Status != tc.status || got.Hibernate != tc.hibernate {
			t.Fatalf("%s reads status %s, hibernate %v", tc.name, got.Status, got.Hibernate)
		}
	}
	slices.Sort(want)
	if got := attentionIDs(t, b); !slices.Equal(got, want) {
		var gotNames, wantNames []string
		for _, id := range got {
			gotNames = append(gotNames, names[id])
		}
		for _, id := range want {
			wantNames = append(wantNames, names[id])
		}
		t.Errorf("attention: %q; want %q", gotNames, wantNames)
	}

	asleep := mustCreate(t, b, runtime("created-asleep"))
	if _, err := b.SetHibernate(ctx, asleep.ID, true); err != nil {
		t.Fatal(err)
	}
	c, err := b.ClaimAndStart(ctx, asleep.ID, "agent-a", ttl, defaultStart)
	if err != nil {
		t.Fatal(err)
	}
	if c.Started || c.Resource.Status != domain.StatusPending || !c.Resource.Hibernate {
		t.Errorf("claim and start of a resource asked to hibernate: started %v, status %s, hibernate %v; want it claimed only",
			c.Started, c.Resource.Status, c.Resource.Hibernate)
	}
	if c.Resource.LeaseHolder != "agent-a" || c.Resource.LeaseExpiresAt == nil || !c.Resource.LeaseExpiresAt.After(time.Now()) {
		t.Errorf("claimed resource: lease holder %q until %v; want agent-a's lease, live", c.Resource.LeaseHolder, c.Resource.LeaseExpiresAt)
	}
	if err := b.ReleaseResource(ctx, asleep.ID, c.Lease); err != nil {
		t.Fatal(err)
	}
	if r := mustGet(t, b, asleep.ID); r.LeaseHolder != "" || r.LeaseExpiresAt != nil {
		t.Errorf("released resource: lease holder %q until %v; want none", r.LeaseHolder, r.LeaseExpiresAt)
	}
}
