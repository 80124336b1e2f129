package statetest

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
)

// deepJSON is an array nested one level deeper than Go's JSON decoder allows.
var deepJSON = strings.Repeat("[", 10001) + strings.Repeat("]", 10001)

// expectUnreadable checks r's only unreadable column is column, for the reason given.
func expectUnreadable(t *testing.T, r domain.Resource, column, reason string) {
	t.Helper()
	want := column + " is not JSON Berth can read: " + reason
	if len(r.Unreadable) != 1 || r.Unreadable[0].Column != column || r.UnreadableReason() != want {
		t.Fatalf("resource %s: unreadable = %+v, want only %q", r.Name, r.Unreadable, want)
	}
}

// testUnreadableRowsAreReadOneByOne writes, with plain SQL, JSON that the database accepts
// and Go cannot decode, and checks that only that row is marked, not the reads of the others,
// and that the row can still be claimed, recorded, health-marked and deleted.
func testUnreadableRowsAreReadOneByOne(t *testing.T, b *Backend) {
	ctx := testContext(t)
	ok := provisioned(t, b, "ok")
	badConfig := provisioned(t, b, "bad-config")
	badState := mustCreate(t, b, runtime("bad-state"))
	mustExec(t, b, `UPDATE resources SET config = '{"host": 1e400}' WHERE id = $1`, badConfig.ID)
	mustExec(t, b, `UPDATE resources SET state = '[1, 2]' WHERE id = $1`, badState.ID)
	names := []string{"ok", "bad-config", "bad-state"}
	if b.Dialect == Postgres {
		// jsonb nests deeper than encoding/json reads; SQLite's JSON refuses such depth itself.
		deep := mustCreate(t, b, runtime("deep"))
		mustExec(t, b, `UPDATE resources SET args = $2::text::jsonb WHERE id = $1`, deep.ID, `{"slots": 1, "x": `+deepJSON+`}`)
		expectUnreadable(t, mustGet(t, b, deep.ID), "args", "nested deeper than 10000 levels")
		names = append(names, "deep")
		if _, err := b.UpdateResourceArgs(ctx, deep.ID, map[string]any{"slots": 2}); err != nil {
			t.Fatalf("replace the unreadable args: %v", err)
		}
		if fixed := mustGet(t, b, deep.ID); !fixed.Readable() || fixed.Args["slots"] != float64(2) {
			t.Fatalf("after replacing its args: %+v, want a readable row with slots 2", fixed)
		}
	}

	got := mustGet(t, b, badConfig.ID)
	expectUnreadable(t, got, "config", "number 1e+400 out of range")
	if got.Config != nil || got.Args["slots"] != float64(1) || got.State["host"] != "http://a" || got.Status != domain.StatusReady {
		t.Fatalf("bad-config = %+v: want config nil and the readable columns read", got)
	}
	expectUnreadable(t, mustGet(t, b, badState.ID), "state", "it holds a JSON array, not an object")
	if r := mustGet(t, b, ok.ID); !r.Readable() {
		t.Fatalf("ok is unreadable: %+v", r.Unreadable)
	}

	listed, err := b.ListResources(ctx, domain.ListFilter{})
	if err != nil {
		t.Fatalf("list with unreadable rows: %v", err)
	}
	var listedNames []string
	for _, r := range listed {
		listedNames = append(listedNames, r.Name)
		// deep was fixed above: only these two are still unreadable.
		if want := r.Name == "bad-config" || r.Name == "bad-state"; r.Readable() == want {
			t.Errorf("listed %s: unreadable columns %v, want unreadable %v", r.Name, r.Unreadable, want)
		}
	}
	if !slices.Equal(listedNames, names) {
		t.Errorf("listed %v, want %v", listedNames, names)
	}

	page, err := b.ListCheckable(ctx, "", 10, "agent-a")
	if err != nil {
		t.Fatalf("a checkable page with an unreadable row: %v", err)
	}
	var unreadableInPage int
	for _, r := range page {
		if !r.Readable() {
			unreadableInPage++
		}
	}
	if len(page) != 2 || unreadableInPage != 1 {
		t.Fatalf("checkable page = %d rows, %d unreadable; want ok and bad-config, the latter marked", len(page), unreadableInPage)
	}

	msg := got.UnreadableReason() + "; fix the column or delete the resource"
	seq := latestSeq(t, b)
	marked, err := b.RecordHealth(ctx, badConfig.ID, got.CheckedBy("checker"), domain.HealthUpdate{Status: domain.StatusError, Reason: domain.ReasonUnreadableRow, StatusMessage: msg})
	if err != nil {
		t.Fatalf("record an unreadable row as error: %v", err)
	}
	if marked.Status != domain.StatusError || marked.StatusMessage != msg || marked.Readable() {
		t.Fatalf("marked = %s %q (unreadable %v), want error with the reason and the column kept as it was", marked.Status, marked.StatusMessage, marked.Unreadable)
	}
	changes, err := b.ChangesAfter(ctx, seq, 10)
	if err != nil || len(changes) != 1 || changes[0].ResourceID != badConfig.ID {
		t.Fatalf("changes after marking = %v, %v; want one of bad-config, for the provisioner to take it over", changes, err)
	}
	expectChangesOwned(t, b)

	claim, err := b.ClaimResource(ctx, badState.ID, "agent-a", ttl)
	if err != nil {
		t.Fatalf("claim an unreadable row: %v", err)
	}
	claimed := claim.Resource
	recorded, err := b.RecordProgress(ctx, badState.ID, claim.Lease, domain.ProgressUpdate{
		Generation: claimed.Generation, Status: domain.StatusError, Reason: domain.ReasonUnreadableRow, StatusMessage: claimed.UnreadableReason(),
		Attempts: 1, RetryIn: time.Minute, LastError: claimed.UnreadableReason(), ReleaseLease: true,
	})
	if err != nil {
		t.Fatalf("record a failed attempt on an unreadable row: %v", err)
	}
	if recorded.Status != domain.StatusError {
		t.Fatalf("recorded = %s; want error", recorded.Status)
	}
	expectRetryIn(t, recorded, time.Minute)
	expectUnreadable(t, recorded, "state", "it holds a JSON array, not an object")

	for _, r := range []domain.Resource{badConfig, badState} {
		if _, err := b.RequestDelete(ctx, r.ID); err != nil {
			t.Fatalf("delete unreadable %s: %v", r.Name, err)
		}
		c, err := b.ClaimResource(ctx, r.ID, "agent-a", ttl)
		if err != nil {
			t.Fatalf("claim unreadable %s to delete it: %v", r.Name, err)
		}
		if err := b.FinalizeDelete(ctx, r.ID, c.Lease); err != nil {
			t.Fatalf("finalize the delete of unreadable %s: %v", r.Name, err)
		}
	}
}
