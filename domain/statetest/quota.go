package statetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/berth-dev/berth/domain"
)

// quotaTests are the contract of domain.QuotaStore.
var quotaTests = []struct {
	name string
	run  func(t *testing.T, b *Backend)
}{
	{"QuotasAreSetListedAndRemoved", testQuotasAreSetListedAndRemoved},
	{"AdmissionCountsResourcesAndSlots", testAdmissionCountsResourcesAndSlots},
	{"AdmissionIsKeptAndLoweredOnlyWhenAsked", testAdmissionIsKeptAndLoweredOnlyWhenAsked},
	{"AdmissionNeedsTheLease", testAdmissionNeedsTheLease},
	{"QuotaChangeWakesItsWaiters", testQuotaChangeWakesItsWaiters},
	{"ConcurrentAdmissionsNeverExceedTheQuota", testConcurrentAdmissionsNeverExceedTheQuota},
	{"DeferredAdmissionIsWrittenWithProgress", testDeferredAdmissionIsWrittenWithProgress},
	{"ClaimTellsTheAdmissionAndTheOwnersQuotas", testClaimTellsTheAdmissionAndTheOwnersQuotas},
}

func limit(n int64) domain.QuotaLimit { return domain.QuotaLimit{Set: true, Max: &n} }

func mustSetQuota(t *testing.T, st domain.QuotaStore, c domain.QuotaChange) domain.QuotaUsage {
	t.Helper()
	q, err := st.SetQuota(testContext(t), c)
	if err != nil {
		t.Fatalf("set quota %+v: %v", c, err)
	}
	return q
}

// admit claims a new runtime of owner for holder and admits it at units on "pool".
func admitNew(t *testing.T, b *Backend, owner, name string, units int64) (domain.Resource, domain.Lease, error) {
	t.Helper()
	nr := runtime(name)
	nr.Owner = owner
	r := mustCreate(t, b, nr)
	lease := mustClaim(t, b, r.ID, "agent-1")
	_, err := b.AdmitResource(testContext(t), r.ID, lease, domain.Admission{Provisioner: "pool", Units: units})
	return r, lease, err
}

func testQuotasAreSetListedAndRemoved(t *testing.T, b *Backend) {
	ctx := testContext(t)
	q := mustSetQuota(t, b, domain.QuotaChange{Owner: "acme", Provisioner: "pool", Resources: limit(5)})
	if q.MaxResources == nil || *q.MaxResources != 5 || q.MaxSlots != nil || q.Resources != 0 || q.UpdatedAt.IsZero() {
		t.Fatalf("set = %+v, want 5 resources, no slot cap, no usage", q)
	}
	// A measure not set keeps its cap; one set to nil loses it.
	q = mustSetQuota(t, b, domain.QuotaChange{Owner: "acme", Provisioner: "pool", Slots: limit(16)})
	if q.MaxResources == nil || *q.MaxResources != 5 || q.MaxSlots == nil || *q.MaxSlots != 16 {
		t.Fatalf("after setting slots = %+v, want 5 resources and 16 slots", q)
	}
	q = mustSetQuota(t, b, domain.QuotaChange{Owner: "acme", Provisioner: "pool", Resources: domain.QuotaLimit{Set: true}})
	if q.MaxResources != nil || q.MaxSlots == nil {
		t.Fatalf("after removing the resource cap = %+v", q)
	}
	mustSetQuota(t, b, domain.QuotaChange{Owner: "zed", Provisioner: "pool", Resources: limit(1)})
	mustSetQuota(t, b, domain.QuotaChange{Owner: "acme", Provisioner: "k8s", Resources: limit(1)})

	all, err := b.ListQuotas(ctx, domain.QuotaFilter{})
	if err != nil || len(all) != 3 || all[0].Provisioner != "k8s" || all[1].Provisioner != "pool" || all[2].Owner != "zed" {
		t.Fatalf("list = %+v, %v; want acme/k8s, acme/pool, zed/pool", all, err)
	}
	acme, err := b.ListQuotas(ctx, domain.QuotaFilter{Owner: "acme", Provisioner: "pool"})
	if err != nil || len(acme) != 1 {
		t.Fatalf("list acme on pool = %+v, %v", acme, err)
	}

	for _, c := range []domain.QuotaChange{
		{Provisioner: "pool", Resources: limit(1)},
		{Owner: "acme", Resources: limit(1)},
		{Owner: "acme", Provisioner: "pool", Resources: limit(-1)},
		{Owner: "acme", Provisioner: "pool", Slots: limit(-2)},
	} {
		var fe *domain.FieldError
		if _, err := b.SetQuota(ctx, c); !errors.As(err, &fe) {
			t.Errorf("set %+v: err = %v, want a FieldError", c, err)
		}
	}

	if err := b.RemoveQuota(ctx, "zed", "pool"); err != nil {
		t.Fatalf("remove: %v", err)
	}
	if err := b.RemoveQuota(ctx, "zed", "pool"); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("remove again: err = %v, want ErrNotFound", err)
	}
}

func testAdmissionCountsResourcesAndSlots(t *testing.T, b *Backend) {
	ctx := testContext(t)
	// No quota: admitted at once.
	free, freeLease, err := admitNew(t, b, "acme", "free", 8)
	if err != nil {
		t.Fatalf("admit without a quota: %v", err)
	}
	mustSetQuota(t, b, domain.QuotaChange{Owner: "acme", Provisioner: "pool", Resources: limit(3), Slots: limit(16)})
	second, secondLease, err := admitNew(t, b, "acme", "second", 4)
	if err != nil {
		t.Fatalf("admit within the quota: %v", err)
	}
	// 12 of 16 slots are admitted: 8 more do not fit.
	_, _, err = admitNew(t, b, "acme", "third", 8)
	var qe *domain.QuotaExceededError
	if !errors.As(err, &qe) {
		t.Fatalf("admit over the slot cap: err = %v, want a QuotaExceededError", err)
	}
	want := `owner "acme" on provisioner "pool": 2 of 3 resources, 12 of 16 slots; this resource needs 8 slots`
	if qe.Error() != want {
		t.Fatalf("error = %q, want %q", qe.Error(), want)
	}
	// Another owner and another provisioner are not counted.
	if _, _, err := admitNew(t, b, "other", "elsewhere", 100); err != nil {
		t.Fatalf("admit another owner's: %v", err)
	}
	if _, _, err := admitNew(t, b, "acme", "fits", 4); err != nil {
		t.Fatalf("admit 4 more slots: %v", err)
	}
	_, _, err = admitNew(t, b, "acme", "fourth", 0)
	if !errors.As(err, &qe) || qe.Resources != 3 || qe.Slots != 16 {
		t.Fatalf("admit a fourth resource: err = %v, want a QuotaExceededError at 3 resources, 16 slots", err)
	}
	usage, err := b.ListQuotas(ctx, domain.QuotaFilter{Owner: "acme"})
	if err != nil || len(usage) != 1 || usage[0].Resources != 3 || usage[0].Slots != 16 {
		t.Fatalf("usage = %+v, %v; want 3 resources and 16 slots", usage, err)
	}
	// A quota below the usage is allowed. A delete requested keeps the admission until the
	// row is removed.
	mustSetQuota(t, b, domain.QuotaChange{Owner: "acme", Provisioner: "pool", Resources: limit(1)})
	mustExec(t, b, `DELETE FROM resources WHERE name IN ('free', 'second')`)
	usage, _ = b.ListQuotas(ctx, domain.QuotaFilter{Owner: "acme"})
	if len(usage) != 1 || usage[0].Resources != 3 {
		t.Fatalf("usage while deleting = %+v, want 3 resources", usage)
	}
	for _, gone := range []struct {
		id    string
		lease domain.Lease
	}{{free.ID, freeLease}, {second.ID, secondLease}} {
		if err := b.FinalizeDelete(ctx, gone.id, gone.lease); err != nil {
			t.Fatalf("finalize delete: %v", err)
		}
	}
	usage, _ = b.ListQuotas(ctx, domain.QuotaFilter{Owner: "acme"})
	if len(usage) != 1 || usage[0].Resources != 1 || usage[0].Slots != 4 {
		t.Fatalf("usage after deletes = %+v, want 1 resource and 4 slots", usage)
	}
}

func testAdmissionIsKeptAndLoweredOnlyWhenAsked(t *testing.T, b *Backend) {
	ctx := testContext(t)
	mustSetQuota(t, b, domain.QuotaChange{Owner: "acme", Provisioner: "pool", Slots: limit(10)})
	r, lease, err := admitNew(t, b, "acme", "grows", 4)
	if err != nil {
		t.Fatal(err)
	}
	admit := func(units int64, lower bool) (int64, error) {
		return b.AdmitResource(ctx, r.ID, lease, domain.Admission{Provisioner: "pool", Units: units, Lower: lower})
	}
	// Its own admission is not counted against its growth.
	if got, err := admit(10, false); err != nil || got != 10 {
		t.Fatalf("grow to 10 = %d, %v", got, err)
	}
	if _, err := admit(11, false); !errors.As(err, new(*domain.QuotaExceededError)) {
		t.Fatalf("grow to 11: err = %v, want a QuotaExceededError", err)
	}
	if got, err := admit(2, false); err != nil || got != 10 {
		t.Fatalf("a shrink not yet applied = %d, %v; want the admission kept at 10", got, err)
	}
	if got, err := admit(2, true); err != nil || got != 2 {
		t.Fatalf("an applied shrink = %d, %v; want 2", got, err)
	}
	usage, _ := b.ListQuotas(ctx, domain.QuotaFilter{Owner: "acme"})
	if len(usage) != 1 || usage[0].Slots != 2 {
		t.Fatalf("usage = %+v, want 2 slots", usage)
	}
	var fe *domain.FieldError
	if _, err := b.AdmitResource(ctx, r.ID, lease, domain.Admission{Units: 1}); !errors.As(err, &fe) {
		t.Fatalf("admit with no provisioner: err = %v, want a FieldError", err)
	}
}

func testAdmissionNeedsTheLease(t *testing.T, b *Backend) {
	ctx := testContext(t)
	r := mustCreate(t, b, runtime("fenced"))
	old := mustClaim(t, b, r.ID, "agent-1")
	mustClaim(t, b, r.ID, "agent-1")
	mustSetQuota(t, b, domain.QuotaChange{Owner: "alice", Provisioner: "pool", Slots: limit(10)})
	for _, quota := range []bool{true, false} {
		if !quota {
			if err := b.RemoveQuota(ctx, "alice", "pool"); err != nil {
				t.Fatal(err)
			}
		}
		_, err := b.AdmitResource(ctx, r.ID, old, domain.Admission{Provisioner: "pool", Units: 1})
		expectLeaseHeld(t, err, "agent-1")
	}
	if _, err := b.AdmitResource(ctx, missingID, old, domain.Admission{Provisioner: "pool", Units: 1}); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("admit a missing row: err = %v, want ErrNotFound", err)
	}
	usage, _ := b.ListQuotas(ctx, domain.QuotaFilter{})
	if len(usage) != 0 {
		t.Fatalf("quotas = %+v, want none", usage)
	}
}

func testQuotaChangeWakesItsWaiters(t *testing.T, b *Backend) {
	ctx := testContext(t)
	mustSetQuota(t, b, domain.QuotaChange{Owner: "acme", Provisioner: "pool", Resources: limit(0)})
	nr := runtime("waits")
	nr.Owner = "acme"
	r := mustCreate(t, b, nr)
	lease := mustClaim(t, b, r.ID, "agent-1")
	if _, err := b.AdmitResource(ctx, r.ID, lease, domain.Admission{Provisioner: "pool", Units: 1}); err == nil {
		t.Fatal("admitted over a quota of 0")
	}
	_, err := b.RecordProgress(ctx, r.ID, lease, domain.ProgressUpdate{
		Generation: r.Generation, Status: domain.StatusPending, Reason: domain.ReasonQuotaExceeded,
		StatusMessage: "waiting for quota", Provisioner: "pool", Attempts: 1, RetryIn: ttl, ReleaseLease: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, b, r.ID); got.NextAttemptAt == nil || got.WaitingSince == nil {
		t.Fatalf("waiting row = %+v, want a retry scheduled and waiting_since", got)
	}
	seq := latestSeq(t, b)
	mustSetQuota(t, b, domain.QuotaChange{Owner: "acme", Provisioner: "pool", Resources: limit(1)})
	if got := mustGet(t, b, r.ID); got.NextAttemptAt != nil {
		t.Fatalf("after the quota rose the retry is at %v, want due now", got.NextAttemptAt)
	}
	if ids := changesSince(t, b, seq); len(ids) != 1 || ids[0] != r.ID {
		t.Fatalf("changes = %v, want the waiting resource", ids)
	}
	expectChangesOwned(t, b)
	lease = mustClaim(t, b, r.ID, "agent-1")
	if _, err := b.AdmitResource(ctx, r.ID, lease, domain.Admission{Provisioner: "pool", Units: 1}); err != nil {
		t.Fatalf("admit after the quota rose: %v", err)
	}
}

// testConcurrentAdmissionsNeverExceedTheQuota is the proof of issue 24: two agents (two
// stores on one database), an owner at its quota, admissions racing from both: none lands
// over the quota.
func testConcurrentAdmissionsNeverExceedTheQuota(t *testing.T, b *Backend) {
	ctx := testContext(t)
	agents := []domain.State{b, b.Reopen(t)}
	const (
		held      = 3
		maxCount  = 5
		maxSlots  = 8
		contender = 10
	)
	for i := range held {
		if _, _, err := admitNew(t, b, "acme", fmt.Sprintf("held-%d", i), 1); err != nil {
			t.Fatal(err)
		}
	}
	mustSetQuota(t, b, domain.QuotaChange{Owner: "acme", Provisioner: "pool", Resources: limit(maxCount), Slots: limit(maxSlots)})

	type claimed struct {
		id    string
		lease domain.Lease
	}
	var racers []claimed
	for i := range contender {
		nr := runtime(fmt.Sprintf("racer-%d", i))
		nr.Owner = "acme"
		r := mustCreate(t, b, nr)
		racers = append(racers, claimed{r.ID, mustClaim(t, agents[i%2], r.ID, fmt.Sprintf("agent-%d", i%2))})
	}
	errs := make([]error, contender)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, r := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, errs[i] = agents[i%2].AdmitResource(ctx, r.id, r.lease, domain.Admission{Provisioner: "pool", Units: 2})
		}()
	}
	close(start)
	wg.Wait()
	var admitted, refused int
	for _, err := range errs {
		switch {
		case err == nil:
			admitted++
		case errors.As(err, new(*domain.QuotaExceededError)):
			refused++
		default:
			t.Errorf("admit: %v", err)
		}
	}
	// 3 held at 1 slot each: 5 slots of room, 2 resources of room: 2 admissions of 2 slots.
	if admitted != 2 || refused != contender-2 {
		t.Fatalf("%d admitted and %d refused, want 2 and %d", admitted, refused, contender-2)
	}
	var count, slots int64
	if err := b.QueryRow(ctx, `
		SELECT count(*), coalesce(sum(admitted_units), 0) FROM resources
		 WHERE owner = 'acme' AND admitted_provisioner = 'pool' AND admitted_units IS NOT NULL`).Scan(&count, &slots); err != nil {
		t.Fatal(err)
	}
	if count > maxCount || slots > maxSlots || count != held+2 || slots != held+4 {
		t.Fatalf("admitted %d resources and %d slots, quota %d and %d; want %d and %d", count, slots, maxCount, maxSlots, held+2, held+4)
	}
}

// An admission with Defer of an owner without a quota writes nothing; the next progress write
// carrying it admits the resource. An owner with a quota is admitted (or refused) as without
// Defer.
func testDeferredAdmissionIsWrittenWithProgress(t *testing.T, b *Backend) {
	ctx := testContext(t)
	nr := runtime("deferred")
	nr.Owner = "acme"
	r := mustCreate(t, b, nr)
	lease := mustClaim(t, b, r.ID, "agent-1")
	deferred := domain.Admission{Provisioner: "pool", Units: 3, Defer: true}
	if _, err := b.AdmitResource(ctx, r.ID, lease, deferred); !errors.Is(err, domain.ErrAdmissionDeferred) {
		t.Fatalf("deferred admission without a quota: err = %v, want ErrAdmissionDeferred", err)
	}
	mustSetQuota(t, b, domain.QuotaChange{Owner: "acme", Provisioner: "pool", Resources: limit(5)})
	usage := func() (int64, int64) {
		t.Helper()
		q, err := b.ListQuotas(ctx, domain.QuotaFilter{Owner: "acme"})
		if err != nil || len(q) != 1 {
			t.Fatalf("list quotas: %+v, %v", q, err)
		}
		return q[0].Resources, q[0].Slots
	}
	if n, slots := usage(); n != 0 || slots != 0 {
		t.Fatalf("usage after a deferred admission = %d resources, %d slots; want nothing written", n, slots)
	}
	if _, err := b.RecordProgress(ctx, r.ID, lease, domain.ProgressUpdate{
		Generation: r.Generation, Status: domain.StatusProvisioning, Reason: domain.ReasonAwaitingReady,
		StatusMessage: "provisioning generation 1: waiting for it to serve", Provisioner: "pool",
		Admission: &domain.Admission{Provisioner: "pool", Units: 3},
	}); err != nil {
		t.Fatal(err)
	}
	if n, slots := usage(); n != 1 || slots != 3 {
		t.Fatalf("usage after the progress write = %d resources, %d slots; want 1 and 3", n, slots)
	}
	// Now the owner has a quota: Defer admits through the quota as without it.
	other := runtime("checked")
	other.Owner = "acme"
	o := mustCreate(t, b, other)
	oLease := mustClaim(t, b, o.ID, "agent-1")
	if got, err := b.AdmitResource(ctx, o.ID, oLease, deferred); err != nil || got != 3 {
		t.Fatalf("deferred admission under a quota = %d, %v; want admitted at 3", got, err)
	}
	if n, slots := usage(); n != 2 || slots != 6 {
		t.Fatalf("usage = %d resources, %d slots; want 2 and 6", n, slots)
	}
}

// testClaimTellsTheAdmissionAndTheOwnersQuotas: a claim reads the row's admission and whether
// its owner has a quota anywhere, so an attempt can skip its own admission statement.
func testClaimTellsTheAdmissionAndTheOwnersQuotas(t *testing.T, b *Backend) {
	ctx := testContext(t)
	nr := runtime("claimed")
	nr.Owner = "acme"
	r := mustCreate(t, b, nr)
	claim := func() domain.Claim {
		t.Helper()
		c, err := b.ClaimResource(ctx, r.ID, "agent-1", ttl)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := claim()
	if c.Admission != (domain.ClaimedAdmission{NoQuota: true}) {
		t.Fatalf("first claim's admission = %+v, want none and no quota", c.Admission)
	}
	if _, err := b.RecordProgress(ctx, r.ID, c.Lease, domain.ProgressUpdate{
		Generation: r.Generation, Status: domain.StatusProvisioning, Reason: domain.ReasonAwaitingReady,
		StatusMessage: "provisioning generation 1: waiting for it to serve", Provisioner: "pool",
		Admission: &domain.Admission{Provisioner: "pool", Units: 3},
	}); err != nil {
		t.Fatal(err)
	}
	if c := claim(); c.Admission != (domain.ClaimedAdmission{Provisioner: "pool", Units: 3, NoQuota: true}) {
		t.Fatalf("claim after the admission = %+v, want pool at 3 units, no quota", c.Admission)
	}
	// A quota of the owner on any provisioner means the attempt must check.
	mustSetQuota(t, b, domain.QuotaChange{Owner: "acme", Provisioner: "elsewhere", Resources: limit(1)})
	if c := claim(); c.Admission != (domain.ClaimedAdmission{Provisioner: "pool", Units: 3}) {
		t.Fatalf("claim with a quota elsewhere = %+v, want pool at 3 units and quotas to check", c.Admission)
	}
	// Another owner's quota is not acme's.
	if err := b.RemoveQuota(ctx, "acme", "elsewhere"); err != nil {
		t.Fatal(err)
	}
	mustSetQuota(t, b, domain.QuotaChange{Owner: "zed", Provisioner: "pool", Resources: limit(1)})
	if c := claim(); !c.Admission.NoQuota {
		t.Fatalf("claim with only another owner's quota = %+v, want no quota", c.Admission)
	}
}
