package sqlite_test

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/sqlite"
)

// The agent's writes on a resource's way to ready write its row once each: the claim takes
// the lease and starts provisioning in one UPDATE, and resources_after_update finds nothing
// left to change in any of them. Each write changes the row and adds the one history event
// its status or message change calls for, nothing more.
func TestAgentWritesChangeTheRowOnce(t *testing.T) {
	ctx := testContext(t)
	st := openState(t, filepath.Join(t.TempDir(), "berth.db"))
	r, err := st.CreateResource(ctx, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	// changes runs write and returns how many rows it changed, triggers included.
	changes := func(name string, write func() error) int64 {
		t.Helper()
		before := totalChanges(ctx, t, st)
		if err := write(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return totalChanges(ctx, t, st) - before
	}

	var c domain.Claim
	n := changes("claim and start", func() (err error) {
		c, err = st.ClaimAndStart(ctx, r.ID, "agent-a", time.Minute,
			domain.ProvisioningStart{Provisioner: "pool", Types: []domain.ResourceType{domain.ResourceTypeRuntime}})
		return err
	})
	if !c.Started || c.Resource.Status != domain.StatusProvisioning || c.Resource.Provisioner != "pool" {
		t.Fatalf("claim: started %v, status %s, provisioner %q; want started, provisioning, pool", c.Started, c.Resource.Status, c.Resource.Provisioner)
	}
	if n != 2 {
		t.Errorf("claim and start changed %d rows, want 2 (the resource once, its provisioning event)", n)
	}
	sameAsStored(ctx, t, st, "the claim", c.Resource)

	u := domain.ProgressUpdate{
		Generation:    c.Resource.Generation,
		Status:        domain.StatusProvisioning,
		Reason:        domain.ReasonProvisioning,
		StatusMessage: "provisioning generation 1: waiting for it to serve",
		State:         map[string]any{"host": "h1"},
	}
	var progress domain.Resource
	if n := changes("record progress", func() (err error) { progress, err = st.RecordProgress(ctx, r.ID, c.Lease, u); return err }); n != 2 {
		t.Errorf("recording progress changed %d rows, want 2 (the resource once, its message event)", n)
	}
	sameAsStored(ctx, t, st, "the progress record", progress)

	observed := c.Resource.Generation
	u.Status, u.Reason, u.StatusMessage, u.ObservedGeneration, u.ReleaseLease = domain.StatusReady, domain.ReasonAvailable, "ready", &observed, true
	var ready domain.Resource
	if n := changes("record ready", func() (err error) { ready, err = st.RecordProgress(ctx, r.ID, c.Lease, u); return err }); n != 2 {
		t.Errorf("recording ready changed %d rows, want 2 (the resource once, its ready event)", n)
	}
	if ready.Status != domain.StatusReady || ready.ReadyAt == nil {
		t.Fatalf("after ready: status %s, ready_at %v; want ready and set", ready.Status, ready.ReadyAt)
	}
	sameAsStored(ctx, t, st, "the ready record", ready)
	if !ready.UpdatedAt.After(c.Resource.UpdatedAt) {
		t.Errorf("updated_at %s after the ready record, want later than the claim's %s", ready.UpdatedAt, c.Resource.UpdatedAt)
	}

	// A write that leaves updated_at alone still has it moved by the trigger.
	if _, err := st.DB().ExecContext(ctx, `UPDATE resources SET status_message = 'serving' WHERE id = $1`, r.ID); err != nil {
		t.Fatal(err)
	}
	got, err := st.GetResource(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !got.UpdatedAt.After(ready.UpdatedAt) {
		t.Errorf("updated_at %s after a plain UPDATE, want later than %s", sqlite.FormatTime(got.UpdatedAt), sqlite.FormatTime(ready.UpdatedAt))
	}
}

// The row a progress record returns is the row as stored, also when the record is a delete
// request, which resets the retry bookkeeping.
func TestRecordProgressReturnsTheStoredRow(t *testing.T) {
	ctx := testContext(t)
	st := openState(t, filepath.Join(t.TempDir(), "berth.db"))
	r, err := st.CreateResource(ctx, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := st.ClaimResource(ctx, r.ID, "agent-a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	u := domain.ProgressUpdate{Generation: 1, Status: domain.StatusError, Reason: domain.ReasonBrokerError, StatusMessage: "failed",
		Attempts: 3, RetryIn: time.Hour, LastError: "boom"}
	failed, err := st.RecordProgress(ctx, r.ID, c.Lease, u)
	if err != nil {
		t.Fatal(err)
	}
	sameAsStored(ctx, t, st, "the failure", failed)
	u.Status, u.Reason, u.StatusMessage = domain.StatusDeleting, domain.ReasonDeleteRequested, "delete requested"
	deleting, err := st.RecordProgress(ctx, r.ID, c.Lease, u)
	if err != nil {
		t.Fatal(err)
	}
	if deleting.Attempts != 0 || deleting.NextAttemptAt != nil || deleting.LastError != "" {
		t.Errorf("after a delete request: attempts %d, next attempt %v, last error %q; want them reset",
			deleting.Attempts, deleting.NextAttemptAt, deleting.LastError)
	}
	sameAsStored(ctx, t, st, "the delete request", deleting)
}

// sameAsStored fails t unless got is the resource's row as stored.
func sameAsStored(ctx context.Context, t *testing.T, st *sqlite.State, what string, got domain.Resource) {
	t.Helper()
	stored, err := st.GetResource(ctx, got.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, stored) {
		t.Errorf("%s returned\n%+v\nstored\n%+v", what, got, stored)
	}
}

// totalChanges is the rows changed through the State's writing connection so far.
func totalChanges(ctx context.Context, t *testing.T, st *sqlite.State) int64 {
	t.Helper()
	var n int64
	if err := st.DB().QueryRowContext(ctx, `SELECT total_changes()`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
