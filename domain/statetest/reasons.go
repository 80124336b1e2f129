package statetest

import (
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
)

// recordAs records u on r under lease, failing the test on an error.
func recordAs(t *testing.T, b *Backend, r domain.Resource, lease domain.Lease, u domain.ProgressUpdate) domain.Resource {
	t.Helper()
	u.Generation = r.Generation
	got, err := b.RecordProgress(testContext(t), r.ID, lease, u)
	if err != nil {
		t.Fatalf("record %s %s: %v", u.Status, u.Reason, err)
	}
	return got
}

// A new row's reason is Created, with no state time; the agent's record writes its reason
// with the status and stamps last_attempt_at on the database clock (the clock of updated_at,
// which the same statement moves); a reason another status has is refused.
func testReasonIsWrittenWithTheStatus(t *testing.T, b *Backend) {
	ctx := testContext(t)
	r := mustCreate(t, b, runtime("web"))
	if r.Reason != domain.ReasonCreated || r.WaitingSince != nil || r.LastAttemptAt != nil {
		t.Fatalf("new row: reason %q, waiting since %v, last attempt %v; want Created and no times", r.Reason, r.WaitingSince, r.LastAttemptAt)
	}
	lease := mustClaim(t, b, r.ID, "agent-a")
	got := recordAs(t, b, r, lease, domain.ProgressUpdate{Status: domain.StatusProvisioning, Reason: domain.ReasonBackoff,
		StatusMessage: "attempt 1 failed: timeout", Attempts: 1, RetryIn: time.Hour, LastError: "timeout"})
	if got.Reason != domain.ReasonBackoff || got.Status != domain.StatusProvisioning {
		t.Fatalf("after the record: %s %s, want provisioning Backoff", got.Status, got.Reason)
	}
	if got.LastAttemptAt == nil || got.LastAttemptAt.Sub(got.UpdatedAt).Abs() > time.Second || got.LastAttemptAt.Before(r.CreatedAt) {
		t.Fatalf("last attempt at %v, updated at %v; want it stamped with the write", got.LastAttemptAt, got.UpdatedAt)
	}
	if read := mustGet(t, b, r.ID); read.Reason != domain.ReasonBackoff || read.LastAttemptAt == nil || !read.LastAttemptAt.Equal(*got.LastAttemptAt) {
		t.Fatalf("read back: reason %q, last attempt %v; want what the record returned", read.Reason, read.LastAttemptAt)
	}

	_, err := b.RecordProgress(ctx, r.ID, lease, domain.ProgressUpdate{Generation: r.Generation, Status: domain.StatusReady,
		Reason: domain.ReasonBackoff, StatusMessage: "ready"})
	expectFieldError(t, err, "reason")
	if read := mustGet(t, b, r.ID); read.Status != domain.StatusProvisioning || read.Reason != domain.ReasonBackoff {
		t.Fatalf("after a refused record: %s %s, want it unchanged", read.Status, read.Reason)
	}
}

// The claim starts the rows whose reason is Created, whatever their message, and sets the
// reason Provisioning; a pending row with another reason is claimed only.
func testClaimStartsCreatedRowsOnly(t *testing.T, b *Backend) {
	ctx := testContext(t)
	fresh := mustCreate(t, b, runtime("fresh"))
	noted := mustCreate(t, b, runtime("noted"))
	waiting := mustCreate(t, b, runtime("waiting"))
	mustExec(t, b, `UPDATE resources SET status_message = 'noted by hand' WHERE id = $1`, noted.ID)
	mustExec(t, b, `UPDATE resources SET reason = 'WaitingForCapacity', waiting_since = $2 WHERE id = $1`, waiting.ID, time.Now())

	for _, r := range []domain.Resource{fresh, noted} {
		c, err := b.ClaimAndStart(ctx, r.ID, "agent-a", ttl, runtimePool)
		if err != nil || !c.Started || c.Resource.Status != domain.StatusProvisioning || c.Resource.Reason != domain.ReasonProvisioning {
			t.Fatalf("claim and start %s: started %v, %s %s, %v; want provisioning Provisioning", r.Name, c.Started, c.Resource.Status, c.Resource.Reason, err)
		}
		if c.Resource.LastAttemptAt != nil {
			t.Fatalf("claim and start %s: last attempt %v; want none, no attempt has ended", r.Name, c.Resource.LastAttemptAt)
		}
	}
	c, err := b.ClaimAndStart(ctx, waiting.ID, "agent-a", ttl, runtimePool)
	if err != nil || c.Started || c.Resource.Status != domain.StatusPending || c.Resource.Reason != domain.ReasonWaitingForCapacity {
		t.Fatalf("claim and start waiting: started %v, %s %s, %v; want claimed only, still waiting", c.Started, c.Resource.Status, c.Resource.Reason, err)
	}
}

// waiting_since is set when the reason becomes WaitingForCapacity, kept across the retries
// that keep it, and cleared when the reason changes; it orders ListWaitingForCapacity.
func testWaitingSinceFollowsTheReason(t *testing.T, b *Backend) {
	r := mustCreate(t, b, runtime("big"))
	lease := mustClaim(t, b, r.ID, "agent-a")
	wait := func(msg string, attempts int) domain.Resource {
		t.Helper()
		time.Sleep(5 * time.Millisecond) // so that a time taken again would differ
		return recordAs(t, b, r, lease, domain.ProgressUpdate{Status: domain.StatusPending, Reason: domain.ReasonWaitingForCapacity,
			StatusMessage: msg, Attempts: attempts, RetryIn: time.Hour})
	}
	first := wait("waiting for capacity: no host has 5 free slots", 1)
	if first.WaitingSince == nil || first.LastAttemptAt == nil || !first.WaitingSince.Equal(*first.LastAttemptAt) {
		t.Fatalf("began waiting: since %v, last attempt %v; want both the time of the write", first.WaitingSince, first.LastAttemptAt)
	}
	again := wait("waiting for capacity: no host has 5 free slots (2 down)", 2)
	if again.WaitingSince == nil || !again.WaitingSince.Equal(*first.WaitingSince) || !again.LastAttemptAt.After(*first.LastAttemptAt) {
		t.Fatalf("still waiting: since %v (was %v), last attempt %v (was %v); want since kept and the attempt stamped",
			again.WaitingSince, first.WaitingSince, again.LastAttemptAt, first.LastAttemptAt)
	}
	listed, err := b.ListWaitingForCapacity(testContext(t), 0)
	if err != nil || len(listed) != 1 || listed[0].ID != r.ID || !listed[0].WaitingSince.Equal(*first.WaitingSince) {
		t.Fatalf("waiting for capacity = %+v, %v; want big, waiting since %v", listed, err, first.WaitingSince)
	}

	placed := recordAs(t, b, r, lease, domain.ProgressUpdate{Status: domain.StatusProvisioning, Reason: domain.ReasonProvisioning,
		StatusMessage: "provisioning generation 1", Attempts: 2})
	if placed.WaitingSince != nil {
		t.Fatalf("placed: waiting since %v, want none", placed.WaitingSince)
	}
	if listed, err := b.ListWaitingForCapacity(testContext(t), 0); err != nil || len(listed) != 0 {
		t.Fatalf("waiting for capacity after placing = %+v, %v; want none", listed, err)
	}
	later := wait("waiting for capacity: the host went away", 3)
	if later.WaitingSince == nil || !later.WaitingSince.After(*first.WaitingSince) {
		t.Fatalf("waiting again: since %v, want a new time after %v", later.WaitingSince, first.WaitingSince)
	}
}

// A delete request, through the store or as a plain SQL DELETE, has the reason
// DeleteRequested and ends the wait for capacity.
func testDeleteRequestHasItsReason(t *testing.T, b *Backend) {
	ctx := testContext(t)
	for _, how := range []string{"store", "sql"} {
		r := mustCreate(t, b, runtime("by-"+how))
		lease := mustClaim(t, b, r.ID, "agent-a")
		recordAs(t, b, r, lease, domain.ProgressUpdate{Status: domain.StatusPending, Reason: domain.ReasonWaitingForCapacity,
			StatusMessage: "waiting for capacity: full", Attempts: 1, RetryIn: time.Hour, ReleaseLease: true})
		if how == "store" {
			if _, err := b.RequestDelete(ctx, r.ID); err != nil {
				t.Fatal(err)
			}
		} else {
			mustExec(t, b, `DELETE FROM resources WHERE id = $1`, r.ID)
		}
		got := mustGet(t, b, r.ID)
		if got.Status != domain.StatusDeleting || got.Reason != domain.ReasonDeleteRequested || got.WaitingSince != nil {
			t.Fatalf("delete requested through the %s: %s %s, waiting since %v; want deleting DeleteRequested, no wait", how, got.Status, got.Reason, got.WaitingSince)
		}
	}
}

// A health record writes its reason with the status.
func testRecordHealthWritesTheReason(t *testing.T, b *Backend) {
	ctx := testContext(t)
	r := provisioned(t, b, "web")
	for _, h := range []domain.HealthUpdate{
		{Status: domain.StatusUnhealthy, Reason: domain.ReasonHealthCheckFailed, StatusMessage: "failing: 503", UnhealthySince: time.Now()},
		{Status: domain.StatusReady, Reason: domain.ReasonRecovered, StatusMessage: "passing again"},
	} {
		got, err := b.RecordHealth(ctx, r.ID, checkedAt(1), h)
		if err != nil || got.Status != h.Status || got.Reason != h.Reason {
			t.Fatalf("record health %s %s: %s %s, %v", h.Status, h.Reason, got.Status, got.Reason, err)
		}
		if read := mustGet(t, b, r.ID); read.Reason != h.Reason {
			t.Fatalf("read back after %s: reason %q", h.Reason, read.Reason)
		}
	}
	_, err := b.RecordHealth(ctx, r.ID, checkedAt(1), domain.HealthUpdate{Status: domain.StatusReady, Reason: domain.ReasonHealthCheckFailed})
	expectFieldError(t, err, "reason")
}

// BackfillCase is a row as a build from before reasons wrote it, and what migration 0015
// fills in for it. Each store's migration test writes the rows at the version before and
// checks them after.
type BackfillCase struct {
	Status  domain.Status
	Message string
	Reason  domain.Reason
	// WaitingSince is the time the message gives; WaitedSinceChange says waiting_since is the
	// row's status_changed_at (a message that does not say since when).
	WaitingSince      *time.Time
	WaitedSinceChange bool
}

// BackfillWaitingSince is the time the waiting row of BackfillCases names.
var BackfillWaitingSince = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// BackfillCases are the shapes the agent wrote before reasons, one of each.
var BackfillCases = []BackfillCase{
	{Status: domain.StatusPending, Message: "", Reason: domain.ReasonCreated},
	{Status: domain.StatusPending, Message: "waiting for capacity since 2026-01-02T03:04:05Z: no host has 5 free slots",
		Reason: domain.ReasonWaitingForCapacity, WaitingSince: &BackfillWaitingSince},
	{Status: domain.StatusPending, Message: "waiting for capacity: full", Reason: domain.ReasonWaitingForCapacity, WaitedSinceChange: true},
	{Status: domain.StatusProvisioning, Message: "provisioning generation 1", Reason: domain.ReasonProvisioning},
	{Status: domain.StatusProvisioning, Message: "attempt 2 failed: timeout; retrying at 2026-01-02T03:04:05Z", Reason: domain.ReasonBackoff},
	{Status: domain.StatusProvisioning, Message: "provisioning generation 1: waiting for it to serve", Reason: domain.ReasonAwaitingReady},
	{Status: domain.StatusReady, Message: "ready at generation 1", Reason: domain.ReasonAvailable},
	{Status: domain.StatusReady, Message: "ready at generation 1: health check passing again since 2026-01-02T03:04:05Z (failed since 2026-01-02T02:00:00Z)",
		Reason: domain.ReasonRecovered},
	{Status: domain.StatusUnhealthy, Message: "health check failing since 2026-01-02T03:04:05Z: 503", Reason: domain.ReasonHealthCheckFailed},
	{Status: domain.StatusError, Message: "config is not JSON Berth can read: number 1e+400 out of range: fix the column with SQL or delete the resource; looking again at 2026-01-02T03:04:05Z",
		Reason: domain.ReasonUnreadableRow},
	{Status: domain.StatusError, Message: "state is not JSON Berth can read: it holds a JSON array, not an object", Reason: domain.ReasonUnreadableRow},
	{Status: domain.StatusError, Message: "args.slots: must be a positive integer", Reason: domain.ReasonBrokerError},
	{Status: domain.StatusDeleting, Message: "delete requested", Reason: domain.ReasonDeleteRequested},
	{Status: domain.StatusDeleting, Message: "deprovision attempt 1 failed: busy; retrying at 2026-01-02T03:04:05Z", Reason: domain.ReasonBackoff},
	{Status: domain.StatusDeleting, Message: "deprovisioning generation 1", Reason: domain.ReasonDeleteRequested},
	{Status: domain.StatusHibernating, Message: "hibernating generation 1", Reason: domain.ReasonHibernating},
	{Status: domain.StatusHibernating, Message: "hibernate attempt 3 failed: busy; retrying at 2026-01-02T03:04:05Z", Reason: domain.ReasonBackoff},
	{Status: domain.StatusHibernated, Message: "hibernated", Reason: domain.ReasonHibernated},
}

// CheckBackfill checks r, written at the version before 0015 as c says with statusChanged as
// its status_changed_at, has the reason and times the migration fills in.
func CheckBackfill(t *testing.T, c BackfillCase, r domain.Resource, statusChanged time.Time) {
	t.Helper()
	want := c.WaitingSince
	if c.WaitedSinceChange {
		want = &statusChanged
	}
	if r.Reason != c.Reason || (want == nil) != (r.WaitingSince == nil) || (want != nil && !r.WaitingSince.Equal(*want)) || r.LastAttemptAt != nil {
		t.Errorf("%s %q: reason %q, waiting since %v, last attempt %v; want %q, waiting since %v, no last attempt",
			c.Status, c.Message, r.Reason, r.WaitingSince, r.LastAttemptAt, c.Reason, want)
	}
}
