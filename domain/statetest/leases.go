package statetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
)

// registerWith registers the agent id with info's ttls.
func registerWith(t *testing.T, st domain.AgentStore, id string, agentTTL, leaseTTL time.Duration) int64 {
	t.Helper()
	session, err := st.RegisterAgent(testContext(t), domain.AgentInfo{ID: id, Version: "v1", TTL: agentTTL, LeaseTTL: leaseTTL})
	if err != nil {
		t.Fatalf("register agent %s: %v", id, err)
	}
	return session
}

func mustDeadAgentsResources(t *testing.T, st domain.AgentStore) []string {
	t.Helper()
	ids, err := st.ResourcesOfDeadAgents(testContext(t))
	if err != nil {
		t.Fatalf("resources of dead agents: %v", err)
	}
	return ids
}

func testDeadAgentsLeasesAreVoid(t *testing.T, b *Backend) {
	ctx := testContext(t)
	registerWith(t, b, "dead", 15*time.Second, time.Hour)
	mustRegister(t, b, "other")
	pending := mustCreate(t, b, runtime("pending"))
	ready := provisioned(t, b, "ready")
	for _, r := range []domain.Resource{pending, ready} {
		if _, err := b.ClaimResource(ctx, r.ID, "dead", ttl); err != nil {
			t.Fatal(err)
		}
	}
	other := b.Reopen(t)

	// While the agent is live its lease is held; the retry is due by its liveness deadline.
	_, err := other.ClaimResource(ctx, pending.ID, "other", ttl)
	expectLeaseHeld(t, err, "dead")
	var held *domain.LeaseHeldError
	if errors.As(err, &held); held.ExpiresAt.After(time.Now().Add(30 * time.Second)) {
		t.Errorf("lease held until %v; want the agent's liveness deadline, before the lease's expiry", held.ExpiresAt)
	}
	if !held.LiveAgent {
		t.Errorf("lease held by a live registered agent: LiveAgent false, want true")
	}
	unregistered := mustCreate(t, b, runtime("unregistered-holder"))
	if _, err := b.ClaimResource(ctx, unregistered.ID, "cli", ttl); err != nil {
		t.Fatal(err)
	}
	_, err = other.ClaimResource(ctx, unregistered.ID, "other", ttl)
	expectLeaseHeld(t, err, "cli")
	if errors.As(err, &held); held.LiveAgent {
		t.Errorf("lease held by a holder that is no registered agent: LiveAgent true, want false")
	}
	if got := mustDeadAgentsResources(t, b); len(got) != 0 {
		t.Errorf("resources of dead agents while all are live: %v; want none", got)
	}

	setHeartbeatAgo(t, b, "dead", time.Minute)
	want := []string{pending.ID, ready.ID}
	slices.Sort(want)
	if got := mustDeadAgentsResources(t, other); !slices.Equal(got, want) {
		t.Errorf("resources of dead agents: %v; want %v", got, want)
	}
	page, err := other.ListCheckable(ctx, "", 10, "other")
	if err != nil {
		t.Fatal(err)
	}
	if len(page) != 1 || page[0].ID != ready.ID {
		t.Errorf("other lists checkable %v; want the dead agent's ready resource", page)
	}
	if a := mustListAgents(t, b)["dead"]; a.LeasesHeld != 0 {
		t.Errorf("the dead agent holds %d leases; want none (they are void)", a.LeasesHeld)
	}
	c, err := other.ClaimAndStart(ctx, pending.ID, "other", ttl, domain.ProvisioningStart{Provisioner: "local", Types: []domain.ResourceType{domain.ResourceTypeRuntime}})
	if err != nil || !c.Started || c.Resource.Status != domain.StatusProvisioning {
		t.Fatalf("claim and start of a dead agent's resource = %s, %v, %v; want it started", c.Resource.Status, c.Started, err)
	}
	if _, err := other.ClaimResource(ctx, ready.ID, "other", ttl); err != nil {
		t.Fatalf("claim of a dead agent's resource: %v", err)
	}
	if got := mustDeadAgentsResources(t, b); len(got) != 0 {
		t.Errorf("resources of dead agents after the takeover: %v; want none", got)
	}
}

func testHeartbeatRenewsTheAgentsLeases(t *testing.T, b *Backend) {
	ctx := testContext(t)
	session := registerWith(t, b, "live", 15*time.Second, time.Hour)
	r := mustCreate(t, b, runtime("rollout"))
	lease := mustClaim(t, b, r.ID, "live")
	// The claim's ttl passed during a long rollout; the agent kept heartbeating.
	mustExec(t, b, `UPDATE resources SET lease_expires_at = $1 WHERE id = $2`, time.Now().Add(-time.Second), r.ID)
	if err := b.HeartbeatAgent(ctx, "live", session); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	other := b.Reopen(t)
	_, err := other.ClaimResource(ctx, r.ID, "other", ttl)
	expectLeaseHeld(t, err, "live")
	var held *domain.LeaseHeldError
	if !errors.As(err, &held) || held.ExpiresAt.After(time.Now().Add(30*time.Second)) {
		t.Errorf("lease held until %v; want the agent's liveness deadline, well before the renewed hour", held.ExpiresAt)
	}
	if _, err := b.RecordProgress(ctx, r.ID, lease, domain.ProgressUpdate{
		Generation: r.Generation, Status: domain.StatusProvisioning, Reason: domain.ReasonProvisioning, StatusMessage: "rolling out",
	}); err != nil {
		t.Errorf("record progress by the heartbeating holder: %v", err)
	}
	if got := mustListAgents(t, b)["live"].LeasesHeld; got != 1 {
		t.Errorf("the live agent holds %d leases; want 1", got)
	}
}

func testUnregisteredHoldersLeasesExpireAsBefore(t *testing.T, b *Backend) {
	ctx := testContext(t)
	registerWith(t, b, "dead", 15*time.Second, 0)
	setHeartbeatAgo(t, b, "dead", time.Hour)
	r := mustCreate(t, b, runtime("cli"))
	if _, err := b.ClaimResource(ctx, r.ID, "unregistered", ttl); err != nil {
		t.Fatal(err)
	}
	_, err := b.ClaimResource(ctx, r.ID, "other", ttl)
	expectLeaseHeld(t, err, "unregistered")
	if got := mustDeadAgentsResources(t, b); len(got) != 0 {
		t.Errorf("resources of dead agents: %v; want none (the holder is not registered)", got)
	}
	mustExec(t, b, `UPDATE resources SET lease_expires_at = $1 WHERE id = $2`, time.Now().Add(-time.Second), r.ID)
	if _, err := b.ClaimResource(ctx, r.ID, "other", ttl); err != nil {
		t.Errorf("claim of an expired lease: %v", err)
	}
}

func testResignLogsAChangePerLease(t *testing.T, b *Backend) {
	ctx := testContext(t)
	session := mustRegister(t, b, "leaving")
	var want []string
	for _, name := range []string{"one", "two"} {
		r := mustCreate(t, b, runtime(name))
		if _, err := b.ClaimResource(ctx, r.ID, "leaving", ttl); err != nil {
			t.Fatal(err)
		}
		want = append(want, r.ID)
	}
	mustCreate(t, b, runtime("not leased"))
	seq := latestSeq(t, b)
	if err := b.ResignAgent(ctx, "leaving", session); err != nil {
		t.Fatalf("resign: %v", err)
	}
	got := changesSince(t, b, seq)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("changes logged by the resignation: %v; want %v, the resources whose leases it cleared", got, want)
	}
	expectChangesOwned(t, b)
}

func testHandOverLogsAChange(t *testing.T, b *Backend) {
	ctx := testContext(t)
	r := mustCreate(t, b, runtime("handed"))
	lease := mustClaim(t, b, r.ID, "stopping")
	seq := latestSeq(t, b)
	if err := b.HandOverResource(ctx, r.ID, domain.Lease{Holder: "other", Token: lease.Token}); err != nil {
		t.Fatalf("hand over by a holder that does not hold it: %v", err)
	}
	if got := changesSince(t, b, seq); len(got) != 0 || leaseHolder(t, b, r.ID) != "stopping" {
		t.Errorf("a hand-over by another holder logged %v and left the lease to %q; want nothing done", got, leaseHolder(t, b, r.ID))
	}
	if err := b.HandOverResource(ctx, r.ID, lease); err != nil {
		t.Fatalf("hand over: %v", err)
	}
	if got := changesSince(t, b, seq); len(got) != 1 || got[0] != r.ID {
		t.Errorf("the hand-over logged %v; want one change of %s", got, r.ID)
	}
	expectChangesOwned(t, b)
	if holder := leaseHolder(t, b, r.ID); holder != "" {
		t.Errorf("lease held by %q after the hand-over; want none", holder)
	}
	if _, err := b.ClaimResource(ctx, r.ID, "other", ttl); err != nil {
		t.Errorf("claim after the hand-over: %v", err)
	}
}

func mustOverdue(t *testing.T, st domain.AgentStore, overdueFor time.Duration, limit int) []string {
	t.Helper()
	ids, err := st.OverdueResources(testContext(t), overdueFor, limit)
	if err != nil {
		t.Fatalf("overdue resources: %v", err)
	}
	return ids
}

// scheduleRetry records a failed attempt of r by holder whose retry is due at, releasing
// the lease unless keepLease.
func scheduleRetry(t *testing.T, b *Backend, r domain.Resource, holder string, at time.Time, keepLease bool) {
	t.Helper()
	ctx := testContext(t)
	claim, err := b.ClaimResource(ctx, r.ID, holder, ttl)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.RecordProgress(ctx, r.ID, claim.Lease, domain.ProgressUpdate{
		Generation: r.Generation, Status: domain.StatusProvisioning, Reason: domain.ReasonProvisioning, StatusMessage: "attempt 1 failed",
		Attempts: 1, LastError: "boom", RetryIn: time.Hour, ReleaseLease: !keepLease,
	})
	if err != nil {
		t.Fatal(err)
	}
	// The store schedules retries from its own clock; a retry due in the past is set directly.
	mustExec(t, b, `UPDATE resources SET next_attempt_at = $2 WHERE id = $1`, r.ID, at)
}

func testOverdueResources(t *testing.T, b *Backend) {
	now := time.Now()
	older := mustCreate(t, b, runtime("older"))
	scheduleRetry(t, b, older, "a", now.Add(-2*time.Minute), false)
	overdue := mustCreate(t, b, runtime("overdue"))
	scheduleRetry(t, b, overdue, "a", now.Add(-time.Minute), false)
	leased := mustCreate(t, b, runtime("leased"))
	scheduleRetry(t, b, leased, "a", now.Add(-time.Minute), true)
	future := mustCreate(t, b, runtime("future"))
	scheduleRetry(t, b, future, "a", now.Add(time.Hour), false)
	failed := mustCreate(t, b, runtime("failed-for-good"))
	claim, err := b.ClaimResource(testContext(t), failed.ID, "a", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.RecordProgress(testContext(t), failed.ID, claim.Lease, domain.ProgressUpdate{
		Generation: 1, Status: domain.StatusError, Reason: domain.ReasonBrokerError, StatusMessage: "bad args", Attempts: 1, LastError: "bad args", ReleaseLease: true,
	}); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, b, runtime("new"))

	if got, want := mustOverdue(t, b, 10*time.Second, 10), []string{older.ID, overdue.ID}; !slices.Equal(got, want) {
		t.Errorf("overdue by 10s: %v; want %v (oldest retry first; not leased, not due, failed for good or never tried)", got, want)
	}
	if got, want := mustOverdue(t, b, 90*time.Second, 10), []string{older.ID}; !slices.Equal(got, want) {
		t.Errorf("overdue by 90s: %v; want %v", got, want)
	}
	if got, want := mustOverdue(t, b, 0, 1), []string{older.ID}; !slices.Equal(got, want) {
		t.Errorf("overdue, limit 1: %v; want %v", got, want)
	}

	// A lease held by an agent that is not live is the dead-agents list's, not this one's.
	registerWith(t, b, "gone", 15*time.Second, time.Hour)
	scheduleRetry(t, b, future, "gone", now.Add(-time.Minute), true)
	setHeartbeatAgo(t, b, "gone", time.Minute)
	if got := mustOverdue(t, b, 10*time.Second, 10); slices.Contains(got, future.ID) {
		t.Errorf("overdue by 10s: %v; a dead agent's lease is listed by ResourcesOfDeadAgents", got)
	}

	for _, bad := range []struct {
		overdueFor time.Duration
		limit      int
		field      string
	}{{-time.Second, 10, "overdueFor"}, {time.Second, 0, "limit"}} {
		_, err := b.OverdueResources(testContext(t), bad.overdueFor, bad.limit)
		var fe *domain.FieldError
		if !errors.As(err, &fe) || fe.Field != bad.field {
			t.Errorf("OverdueResources(%s, %d) = %v; want a FieldError naming %s", bad.overdueFor, bad.limit, err, bad.field)
		}
	}
}

func testUnclaimedResources(t *testing.T, b *Backend) {
	ctx := testContext(t)
	now := time.Now()
	mustRegister(t, b, "live")
	registerWith(t, b, "dead", 15*time.Second, time.Hour)
	fresh := mustCreate(t, b, runtime("fresh"))
	leased := mustCreate(t, b, runtime("leased"))
	if _, err := b.ClaimResource(ctx, leased.ID, "live", ttl); err != nil {
		t.Fatal(err)
	}
	orphaned := mustCreate(t, b, runtime("orphaned"))
	if _, err := b.ClaimResource(ctx, orphaned.ID, "dead", ttl); err != nil {
		t.Fatal(err)
	}
	setHeartbeatAgo(t, b, "dead", time.Minute)
	done := provisioned(t, b, "done")
	later := mustCreate(t, b, runtime("later"))
	scheduleRetry(t, b, later, "live", now.Add(time.Hour), false)
	due := mustCreate(t, b, runtime("due"))
	scheduleRetry(t, b, due, "live", now.Add(-time.Minute), false)

	ids := []string{due.ID, "not-a-uuid", fresh.ID, leased.ID, done.ID, "00000000-0000-4000-8000-000000000000", later.ID, orphaned.ID}
	got, err := b.UnclaimedResources(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{due.ID, fresh.ID, orphaned.ID}; !slices.Equal(got, want) {
		t.Errorf("unclaimed %v; want %v (in the order given: due, fresh and the dead agent's)", got, want)
	}
	if got, err := b.UnclaimedResources(ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("unclaimed of none: %v, %v", got, err)
	}
}

// mustQuiet lists the resources left quiet, each as its id and owner ("id owner").
func mustQuiet(t *testing.T, st domain.AgentStore, quietFor time.Duration, limit int) []string {
	t.Helper()
	quiet, err := st.QuietResources(testContext(t), quietFor, limit)
	if err != nil {
		t.Fatalf("quiet resources: %v", err)
	}
	out := make([]string, len(quiet))
	for i, a := range quiet {
		out[i] = a.ID + " " + a.Owner
	}
	return out
}

func testQuietResources(t *testing.T, b *Backend) {
	ctx := testContext(t)
	untouched := mustCreate(t, b, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: "untouched", Owner: "alice", Args: map[string]any{"slots": 1}})
	leased := mustCreate(t, b, runtime("leased"))
	if _, err := b.ClaimResource(ctx, leased.ID, "a", ttl); err != nil {
		t.Fatal(err)
	}
	retrying := mustCreate(t, b, runtime("retrying"))
	scheduleRetry(t, b, retrying, "a", time.Now().Add(-time.Hour), false)
	failed := mustCreate(t, b, runtime("failed-for-good"))
	claim, err := b.ClaimResource(ctx, failed.ID, "a", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.RecordProgress(ctx, failed.ID, claim.Lease, domain.ProgressUpdate{
		Generation: 1, Status: domain.StatusError, Reason: domain.ReasonBrokerError, StatusMessage: "bad args", Attempts: 1, LastError: "bad args", ReleaseLease: true,
	}); err != nil {
		t.Fatal(err)
	}
	paused := mustCreate(t, b, runtime("paused"))
	mustExec(t, b, `UPDATE resources SET paused = true WHERE id = $1`, paused.ID)
	expired := mustCreate(t, b, runtime("lease-expired"))
	if _, err := b.ClaimResource(ctx, expired.ID, "a", time.Millisecond); err != nil {
		t.Fatal(err)
	}
	// Both stores compare written times with their clock: past the millisecond the stored
	// times keep, and past the expired lease.
	time.Sleep(20 * time.Millisecond)

	if got, want := mustQuiet(t, b, 0, 10), []string{untouched.ID + " alice", expired.ID + " " + expired.Owner}; !slices.Equal(got, want) {
		t.Errorf("quiet for 0s: %v; want %v (least recently written first, with their owners; not leased, retrying, failed for good or paused)", got, want)
	}
	if got, want := mustQuiet(t, b, 0, 1), []string{untouched.ID + " alice"}; !slices.Equal(got, want) {
		t.Errorf("quiet for 0s, limit 1: %v; want %v", got, want)
	}
	if got := mustQuiet(t, b, time.Hour, 10); len(got) != 0 {
		t.Errorf("quiet for 1h: %v; want none (every row was written just now)", got)
	}

	for _, bad := range []struct {
		quietFor time.Duration
		limit    int
		field    string
	}{{-time.Second, 10, "quietFor"}, {time.Second, 0, "limit"}} {
		_, err := b.QuietResources(testContext(t), bad.quietFor, bad.limit)
		var fe *domain.FieldError
		if !errors.As(err, &fe) || fe.Field != bad.field {
			t.Errorf("QuietResources(%s, %d) = %v; want a FieldError naming %s", bad.quietFor, bad.limit, err, bad.field)
		}
	}
}
