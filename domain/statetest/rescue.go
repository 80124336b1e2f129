package statetest

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
)

// testForgetResourceRecordsWhoAndWhatIsLeft: a resource whose provisioner is gone is removed
// without deprovisioning, whatever its status; its history keeps who forgot it, why, and
// the keys (never the values) of what its provisioner may have left behind, and the removal
// is logged as a change so every agent's watcher lets go of it.
func testForgetResourceRecordsWhoAndWhatIsLeft(t *testing.T, b *Backend) {
	ctx := testContext(t)
	nr := runtime("stranded")
	nr.Provisioner = "gone"
	r := mustCreate(t, b, nr)
	mustExec(t, b, `UPDATE resources SET status = 'deleting', state = $2, config = $3 WHERE id = $1`,
		r.ID, `{"container":"c-1"}`, `{"password":"s3cret","url":"http://h:1"}`)
	seq := latestSeq(t, b)

	forgotten, err := b.ForgetResource(ctx, r.ID, domain.Forgetting{By: "alice", Reason: "provisioner gone retired"})
	if err != nil {
		t.Fatalf("forget: %v", err)
	}
	if forgotten.ID != r.ID || forgotten.Status != domain.StatusDeleting || forgotten.Provisioner != "gone" {
		t.Fatalf("forget returned %s %s on %q, want the row as it was (%s deleting on \"gone\")", forgotten.ID, forgotten.Status, forgotten.Provisioner, r.ID)
	}
	if _, err := b.GetResource(ctx, r.ID); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("after forget: err = %v, want ErrNotFound", err)
	}
	if ids := changesSince(t, b, seq); len(ids) != 1 || ids[0] != r.ID {
		t.Fatalf("changes logged by forget = %v, want [%s]", ids, r.ID)
	}
	events, err := b.ListEvents(ctx, r.ID, 0)
	if err != nil {
		t.Fatalf("list events: %v", err)
	}
	var msg string
	for _, e := range events {
		if e.Kind == domain.EventControl && strings.HasPrefix(e.Message, "forgotten") {
			msg = e.Message
		}
	}
	for _, want := range []string{"by alice", `"provisioner gone retired"`, `provisioner "gone"`, "state keys: container", "config keys: password, url", "deleting"} {
		if !strings.Contains(msg, want) {
			t.Errorf("forget event %q lacks %q (events: %v)", msg, want, events)
		}
	}
	if strings.Contains(msg, "s3cret") || strings.Contains(msg, "c-1") {
		t.Errorf("forget event %q shows a value of the state or config", msg)
	}
	if _, err := b.ForgetResource(ctx, r.ID, domain.Forgetting{By: "alice"}); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("forget again: err = %v, want ErrNotFound", err)
	}
	if _, err := b.ForgetResource(ctx, missingID, domain.Forgetting{}); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("forget a missing id: err = %v, want ErrNotFound", err)
	}
}

// testForgetWaitsForALiveLease: while an agent holds the resource's lease it may be
// (de)provisioning it, and forgetting it then could leak what it makes: the forget is
// refused naming the holder and the row kept; once the lease has ended it goes.
func testForgetWaitsForALiveLease(t *testing.T, b *Backend) {
	ctx := testContext(t)
	r := mustCreate(t, b, runtime("busy"))
	mustClaim(t, b, r.ID, "agent-1")
	_, err := b.ForgetResource(ctx, r.ID, domain.Forgetting{By: "alice"})
	expectLeaseHeld(t, err, "agent-1")
	if !strings.Contains(err.Error(), "try again once the lease has ended") {
		t.Fatalf("forget under a lease: %v, want it to say when to try again", err)
	}
	if got := mustGet(t, b, r.ID); got.ID != r.ID {
		t.Fatalf("a refused forget removed the row")
	}
	mustExec(t, b, `UPDATE resources SET lease_expires_at = $2 WHERE id = $1`, r.ID, time.Now().Add(-time.Hour).UTC())
	if _, err := b.ForgetResource(ctx, r.ID, domain.Forgetting{By: "alice"}); err != nil {
		t.Fatalf("forget once the lease has expired: %v", err)
	}
	if _, err := b.GetResource(ctx, r.ID); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("after forget: err = %v, want ErrNotFound", err)
	}
}

// testSetProvisionerMakesAFailedResourceRetryable: a resource that failed because it named
// a provisioner no agent has moves to another one with its permanent failure cleared and a
// change logged, so an agent reconciles it there at once; one that may hold things on its
// provisioner, or is being deleted, keeps it.
func testSetProvisionerMakesAFailedResourceRetryable(t *testing.T, b *Backend) {
	ctx := testContext(t)
	nr := runtime("misnamed")
	nr.Provisioner = "nosuch"
	r := mustCreate(t, b, nr)
	mustExec(t, b, `UPDATE resources SET status = 'error', reason = 'BrokerError', attempts = 1, last_error = 'provisioner "nosuch" is not in the provisioner set' WHERE id = $1`, r.ID)
	seq := latestSeq(t, b)

	moved, err := b.SetProvisioner(ctx, r.ID, "static")
	if err != nil {
		t.Fatalf("set provisioner: %v", err)
	}
	if moved.Provisioner != "static" || moved.Attempts != 0 || moved.LastError != "" || moved.NextAttemptAt != nil {
		t.Fatalf("after set provisioner: provisioner %q attempts %d last error %q next attempt %v, want static with the failure cleared",
			moved.Provisioner, moved.Attempts, moved.LastError, moved.NextAttemptAt)
	}
	if ids := changesSince(t, b, seq); len(ids) != 1 || ids[0] != r.ID {
		t.Fatalf("changes logged by set provisioner = %v, want [%s]", ids, r.ID)
	}
	att, err := b.ResourcesNeedingAttention(ctx, "", 10)
	if err != nil {
		t.Fatalf("resources needing attention: %v", err)
	}
	if !containsAttention(att, r.ID) {
		t.Fatalf("a moved resource needs no attention: %v", att)
	}
	seq = latestSeq(t, b)
	if same, err := b.SetProvisioner(ctx, r.ID, "static"); err != nil || same.Provisioner != "static" {
		t.Fatalf("set the same provisioner again: %v", err)
	}
	if ids := changesSince(t, b, seq); len(ids) != 0 {
		t.Fatalf("setting the same provisioner logged %v", ids)
	}

	served := mustCreate(t, b, runtime("served"))
	mustExec(t, b, `UPDATE resources SET provisioner = 'static', status = 'ready', reason = 'Available', observed_generation = 1, state = $2 WHERE id = $1`,
		served.ID, `{"container":"c-2"}`)
	if _, err := b.SetProvisioner(ctx, served.ID, "other"); !errors.Is(err, domain.ErrConflict) || !strings.Contains(err.Error(), "delete the resource and create it again") {
		t.Fatalf("move a provisioned resource: err = %v, want ErrConflict naming the way out", err)
	}
	if got := mustGet(t, b, served.ID); got.Provisioner != "static" {
		t.Fatalf("a refused move changed the provisioner to %q", got.Provisioner)
	}
	if _, err := b.RequestDelete(ctx, r.ID); err != nil {
		t.Fatalf("request delete: %v", err)
	}
	if _, err := b.SetProvisioner(ctx, r.ID, "other"); !errors.Is(err, domain.ErrConflict) || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("move a resource being deleted: err = %v, want ErrConflict naming delete --force", err)
	}
	if _, err := b.SetProvisioner(ctx, missingID, "static"); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("move a missing id: err = %v, want ErrNotFound", err)
	}
}

func containsAttention(att []domain.Attention, id string) bool {
	for _, a := range att {
		if a.ID == id {
			return true
		}
	}
	return false
}

// testAgentsReportTheirProvisioners: an agent's row names its provisioners, sorted, once
// its membership worker records them; a new registration keeps them until it records its
// own, and a session that moved on records nothing.
func testAgentsReportTheirProvisioners(t *testing.T, b *Backend) {
	ctx := testContext(t)
	session := mustRegister(t, b, "agent-1")
	if got := mustListAgents(t, b)["agent-1"].Provisioners; len(got) != 0 {
		t.Fatalf("provisioners of an agent that has not said = %v, want none", got)
	}
	if err := b.SetAgentProvisioners(ctx, "agent-1", session, []string{"static", "kube"}); err != nil {
		t.Fatalf("set provisioners: %v", err)
	}
	if got := mustListAgents(t, b)["agent-1"].Provisioners; !slices.Equal(got, []string{"kube", "static"}) {
		t.Fatalf("provisioners = %v, want [kube static]", got)
	}
	newer := mustRegister(t, b, "agent-1")
	expectSessionEnded(t, b.SetAgentProvisioners(ctx, "agent-1", session, []string{"old"}), "set provisioners of an old session")
	if err := b.SetAgentProvisioners(ctx, "agent-1", newer, nil); err != nil {
		t.Fatalf("set no provisioners: %v", err)
	}
	if got := mustListAgents(t, b)["agent-1"].Provisioners; len(got) != 0 {
		t.Fatalf("provisioners after setting none = %v, want none", got)
	}
}
