package statetest

import (
	"errors"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
)

// countingPick places every request on host and counts how often it was asked.
type countingPick struct {
	host  string
	calls int
}

func (p *countingPick) pick(domain.SlotRequest, *domain.Reservation, []domain.HostUsage) (string, error) {
	p.calls++
	return p.host, nil
}

// reservationOf returns the resource's reservation with provisioner "pool", or nil.
func reservationOf(t *testing.T, b *Backend, id string) *domain.Reservation {
	t.Helper()
	res, err := b.GetReservation(testContext(t), "pool", id)
	if errors.Is(err, domain.ErrNotFound) {
		return nil
	}
	if err != nil {
		t.Fatalf("reservation of %s: %v", id, err)
	}
	return &res
}

func poolRequest(id string, slots int, lease *domain.Lease) domain.SlotRequest {
	return domain.SlotRequest{Provisioner: "pool", ResourceID: id, Owner: "alice", Slots: slots, Lease: lease, HostSlots: slotsEach(hostCapacity)}
}

// Once another agent re-claimed a resource, nothing the earlier claim's holder writes under
// its old lease lands: no progress, finalize, reservation (new, resized or released), release
// or hand-over; the new holder's writes do.
func testWritesUnderAFencedLeaseAreRefused(t *testing.T, b *Backend) {
	ctx := testContext(t)
	r := mustCreate(t, b, runtime("web"))
	a := mustClaim(t, b, r.ID, "agent-a")
	if _, err := b.RecordProgress(ctx, r.ID, a, domain.ProgressUpdate{Generation: 1, Status: domain.StatusProvisioning, Reason: domain.ReasonProvisioning, StatusMessage: "placing"}); err != nil {
		t.Fatal(err)
	}
	pick := &countingPick{host: "h1"}
	if _, err := b.ReserveSlots(ctx, poolRequest(r.ID, 2, &a), pick.pick); err != nil {
		t.Fatalf("reserve under the live lease: %v", err)
	}
	placed := reservationOf(t, b, r.ID)

	// agent-a paused past its lease; agent-b took the resource over.
	mustExec(t, b, `UPDATE resources SET lease_expires_at = $2 WHERE id = $1`, r.ID, time.Now().Add(-time.Second))
	bl := mustClaim(t, b, r.ID, "agent-b")
	if bl.Token <= a.Token {
		t.Fatalf("b's claim has token %d, a's had %d; want it greater", bl.Token, a.Token)
	}
	seq := latestSeq(t, b)
	before := mustGet(t, b, r.ID)

	_, err := b.RecordProgress(ctx, r.ID, a, domain.ProgressUpdate{Generation: 1, Status: domain.StatusReady, Reason: domain.ReasonAvailable, StatusMessage: "stale"})
	expectLeaseHeld(t, err, "agent-b")
	pick.calls = 0
	_, err = b.ReserveSlots(ctx, poolRequest(r.ID, 3, &a), pick.pick)
	expectLeaseHeld(t, err, "agent-b")
	expectLeaseHeld(t, b.ReleaseSlots(ctx, "pool", r.ID, &a), "agent-b")
	if pick.calls != 0 {
		t.Errorf("a refused reservation asked the picker %d times; want none", pick.calls)
	}
	if got := reservationOf(t, b, r.ID); got == nil || *got != *placed {
		t.Errorf("reservation after the refused writes = %+v; want %+v untouched", got, placed)
	}
	if err := b.ReleaseResource(ctx, r.ID, a); err != nil {
		t.Fatalf("release under the old lease: %v", err)
	}
	if err := b.HandOverResource(ctx, r.ID, a); err != nil {
		t.Fatalf("hand over under the old lease: %v", err)
	}
	if holder := leaseHolder(t, b, r.ID); holder != "agent-b" {
		t.Errorf("lease held by %q after the old lease's release and hand-over; want agent-b's kept", holder)
	}
	if _, err := b.RequestDelete(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	expectLeaseHeld(t, b.FinalizeDelete(ctx, r.ID, a), "agent-b")
	after := mustGet(t, b, r.ID)
	if after.Status != domain.StatusDeleting || after.StatusMessage == "stale" || after.ObservedGeneration != 0 {
		t.Errorf("after the refused writes and a delete request: %+v; want only the delete request applied", after)
	}
	if after.LeaseToken != before.LeaseToken {
		t.Errorf("lease token moved from %d to %d without a claim", before.LeaseToken, after.LeaseToken)
	}
	if ids := changesSince(t, b, seq); len(ids) != 1 {
		t.Errorf("changes logged %v; want only the delete request's", ids)
	}

	// The current holder's writes go through.
	if err := b.ReleaseSlots(ctx, "pool", r.ID, &bl); err != nil {
		t.Fatalf("release under the current lease: %v", err)
	}
	if err := b.FinalizeDelete(ctx, r.ID, bl); err != nil {
		t.Fatalf("finalize under the current lease: %v", err)
	}
	// The row is gone: a write under a lease finds nothing to write for.
	if _, err := b.ReserveSlots(ctx, poolRequest(r.ID, 1, &bl), pick.pick); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("reserve for a removed row under its last lease: err = %v; want ErrNotFound", err)
	}
	if got := reservationOf(t, b, r.ID); got != nil {
		t.Errorf("reservation of the removed row: %+v; want none", got)
	}
}

// A second claim by the same holder (a second process under the same agent id) fences the
// first one's writes; its own go through.
func testSameHolderReclaimFencesTheEarlierClaim(t *testing.T, b *Backend) {
	ctx := testContext(t)
	r := mustCreate(t, b, runtime("web"))
	first := mustClaim(t, b, r.ID, "agent-a")
	second := mustClaim(t, b.Reopen(t), r.ID, "agent-a")
	if second.Token <= first.Token {
		t.Fatalf("the renewal has token %d, the first claim %d; want it greater", second.Token, first.Token)
	}
	_, err := b.RecordProgress(ctx, r.ID, first, domain.ProgressUpdate{Generation: 1, Status: domain.StatusProvisioning, Reason: domain.ReasonProvisioning, StatusMessage: "first"})
	expectLeaseHeld(t, err, "agent-a")
	pick := &countingPick{host: "h1"}
	_, err = b.ReserveSlots(ctx, poolRequest(r.ID, 1, &first), pick.pick)
	expectLeaseHeld(t, err, "agent-a")
	if got := reservationOf(t, b, r.ID); got != nil || pick.calls != 0 {
		t.Errorf("a refused reservation made %+v and asked the picker %d times; want nothing", got, pick.calls)
	}
	if err := b.ReleaseResource(ctx, r.ID, first); err != nil {
		t.Fatal(err)
	}
	if holder := leaseHolder(t, b, r.ID); holder != "agent-a" {
		t.Fatalf("the first claim's release left the lease to %q; want the second claim's kept", holder)
	}
	got, err := b.RecordProgress(ctx, r.ID, second, domain.ProgressUpdate{Generation: 1, Status: domain.StatusProvisioning, Reason: domain.ReasonProvisioning, StatusMessage: "second"})
	if err != nil || got.StatusMessage != "second" {
		t.Fatalf("record under the second claim = %+v, %v", got, err)
	}
	if _, err := b.ReserveSlots(ctx, poolRequest(r.ID, 1, &second), pick.pick); err != nil {
		t.Fatalf("reserve under the second claim: %v", err)
	}
}

// Slot writes under no lease (a health check's repair, an orphan sweep) are refused while
// someone holds a live lease on the resource, and allowed when the lease is free, expired or
// void (its agent is not live), or the row is gone.
func testLeaselessSlotWritesYieldToALiveLease(t *testing.T, b *Backend) {
	ctx := testContext(t)
	registerWith(t, b, "live", 15*time.Second, time.Hour)
	r := mustCreate(t, b, runtime("web"))
	pick := &countingPick{host: "h1"}
	if _, err := b.ReserveSlots(ctx, poolRequest(r.ID, 1, nil), pick.pick); err != nil {
		t.Fatalf("reserve without a lease on a free row: %v", err)
	}
	mustClaim(t, b, r.ID, "live")
	placed := reservationOf(t, b, r.ID)
	pick.calls = 0
	_, err := b.ReserveSlots(ctx, poolRequest(r.ID, 2, nil), pick.pick)
	expectLeaseHeld(t, err, "live")
	expectLeaseHeld(t, b.ReleaseSlots(ctx, "pool", r.ID, nil), "live")
	if got := reservationOf(t, b, r.ID); got == nil || *got != *placed || pick.calls != 0 {
		t.Errorf("refused writes left %+v (picker asked %d times); want %+v untouched", got, pick.calls, placed)
	}

	// The agent died: its lease is void.
	setHeartbeatAgo(t, b, "live", time.Minute)
	if _, err := b.ReserveSlots(ctx, poolRequest(r.ID, 2, nil), pick.pick); err != nil {
		t.Errorf("reserve without a lease over a dead agent's lease: %v", err)
	}
	// A holder that is not a registered agent: its lease holds until it expires.
	mustClaim(t, b, r.ID, "cli")
	expectLeaseHeld(t, b.ReleaseSlots(ctx, "pool", r.ID, nil), "cli")
	mustExec(t, b, `UPDATE resources SET lease_expires_at = $2 WHERE id = $1`, r.ID, time.Now().Add(-time.Second))
	if err := b.ReleaseSlots(ctx, "pool", r.ID, nil); err != nil {
		t.Errorf("release without a lease over an expired lease: %v", err)
	}
	if got := reservationOf(t, b, r.ID); got != nil {
		t.Errorf("reservation after the release: %+v; want none", got)
	}

	// An orphan: a reservation whose row is gone is released by a sweep holding no lease.
	gone := mustCreate(t, b, runtime("gone"))
	if _, err := b.ReserveSlots(ctx, poolRequest(gone.ID, 1, nil), pick.pick); err != nil {
		t.Fatal(err)
	}
	if _, err := b.RequestDelete(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	if err := b.FinalizeDelete(ctx, gone.ID, mustClaim(t, b, gone.ID, "agent-a")); err != nil {
		t.Fatal(err)
	}
	if err := b.ReleaseSlots(ctx, "pool", gone.ID, nil); err != nil {
		t.Fatalf("release of an orphan's reservation: %v", err)
	}
	if got := reservationOf(t, b, gone.ID); got != nil {
		t.Errorf("orphan's reservation after the sweep: %+v; want none", got)
	}
}

// A claim over a lease another holder no longer holds reports the takeover and how long the
// work waited; a claim of a free lease or of one's own reports none. Heartbeats renew a lease
// without bumping its token; every claim bumps it.
func testClaimReportsTakeovers(t *testing.T, b *Backend) {
	ctx := testContext(t)
	session := registerWith(t, b, "dead", 15*time.Second, time.Hour)
	r := mustCreate(t, b, runtime("web"))
	c, err := b.ClaimResource(ctx, r.ID, "dead", ttl)
	if err != nil || c.Takeover != nil {
		t.Fatalf("claim of a free lease = %+v, %v; want no takeover", c.Takeover, err)
	}
	if c.Lease != (domain.Lease{Holder: "dead", Token: c.Resource.LeaseToken}) || c.Lease.Token < 1 {
		t.Fatalf("claim's lease = %+v, row's token %d; want the holder and the row's new token", c.Lease, c.Resource.LeaseToken)
	}
	if err := b.HeartbeatAgent(ctx, "dead", session); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, b, r.ID).LeaseToken; got != c.Lease.Token {
		t.Errorf("token after a heartbeat = %d; want %d (heartbeats do not bump it)", got, c.Lease.Token)
	}
	again, err := b.ClaimResource(ctx, r.ID, "dead", ttl)
	if err != nil || again.Takeover != nil || again.Lease.Token != c.Lease.Token+1 {
		t.Fatalf("renewal by the holder = %+v, %v; want token %d and no takeover", again, err, c.Lease.Token+1)
	}

	setHeartbeatAgo(t, b, "dead", 2*time.Minute)
	took, err := b.ClaimResource(ctx, r.ID, "other", ttl)
	if err != nil {
		t.Fatalf("claim over a dead agent's lease: %v", err)
	}
	if took.Takeover == nil || took.Takeover.PreviousHolder != "dead" {
		t.Fatalf("takeover = %+v; want one from dead", took.Takeover)
	}
	// Waited is read on the database clock since the last heartbeat, set two minutes back.
	if w := took.Takeover.Waited; w < 2*time.Minute-5*time.Second || w > 10*time.Minute {
		t.Errorf("waited %v; want about the two minutes since dead's last heartbeat", w)
	}

	// An unregistered holder's lease is taken over once it expires.
	mustExec(t, b, `UPDATE resources SET lease_expires_at = $2 WHERE id = $1`, r.ID, time.Now().Add(-3*time.Minute))
	took, err = b.ClaimResource(ctx, r.ID, "third", ttl)
	if err != nil || took.Takeover == nil || took.Takeover.PreviousHolder != "other" {
		t.Fatalf("claim over an expired lease = %+v, %v; want a takeover from other", took.Takeover, err)
	}
	if w := took.Takeover.Waited; w < 3*time.Minute-5*time.Second || w > 10*time.Minute {
		t.Errorf("waited %v; want about the three minutes since the lease expired", w)
	}
	if err := b.ReleaseResource(ctx, r.ID, took.Lease); err != nil {
		t.Fatal(err)
	}
	started, err := b.ClaimAndStart(ctx, r.ID, "fourth", ttl, runtimePool)
	if err != nil || started.Takeover != nil || !started.Started {
		t.Fatalf("claim and start of a released lease = %+v, %v; want started, no takeover", started, err)
	}
}
