package statetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
)

func testChangeLog(t *testing.T, b *Backend) {
	ctx := testContext(t)
	if seq := latestSeq(t, b); seq != 0 {
		t.Fatalf("latest seq of an empty log = %d, want 0", seq)
	}
	ra := mustCreate(t, b, runtime("a"))
	rb := mustCreate(t, b, runtime("b"))
	rc := mustCreate(t, b, runtime("c"))
	all, err := b.ChangesAfter(ctx, 0, 0)
	if err != nil || len(all) != 3 || all[0].ResourceID != ra.ID || all[1].ResourceID != rb.ID || all[2].ResourceID != rc.ID {
		t.Fatalf("all changes = %+v, %v; want a, b, c in order", all, err)
	}
	if latest := latestSeq(t, b); latest != all[2].Seq {
		t.Fatalf("latest seq = %d, want %d", latest, all[2].Seq)
	}
	page, err := b.ChangesAfter(ctx, all[0].Seq, 1)
	if err != nil || len(page) != 1 || page[0] != all[1] {
		t.Fatalf("one change after %d = %+v, %v; want %+v", all[0].Seq, page, err, all[1])
	}
	in, err := b.ChangesIn(ctx, []int64{all[2].Seq, all[0].Seq, all[2].Seq + 100})
	if err != nil || len(in) != 2 || in[0] != all[0] || in[1] != all[2] {
		t.Fatalf("changes in = %+v, %v; want the two that exist, in order", in, err)
	}
	if none, err := b.ChangesIn(ctx, nil); err != nil || len(none) != 0 {
		t.Fatalf("changes in no seqs = %+v, %v; want none", none, err)
	}

	mustExec(t, b, `UPDATE change_log SET created_at = $1 WHERE seq <= $2`, time.Now().Add(-2*time.Hour), all[1].Seq)
	pruned, err := b.PruneChanges(ctx, leaderTerm(t, b, "leader"), time.Hour)
	if err != nil || pruned != 2 {
		t.Fatalf("prune = %d, %v; want 2", pruned, err)
	}
	left, err := b.ChangesAfter(ctx, 0, 0)
	if err != nil || len(left) != 1 || left[0] != all[2] {
		t.Fatalf("after prune = %+v, %v; want only the newest", left, err)
	}

	// Numbers are never handed out again, even once the newest entries are pruned.
	mustExec(t, b, `UPDATE change_log SET created_at = $1`, time.Now().Add(-2*time.Hour))
	if _, err := b.PruneChanges(ctx, leaderTerm(t, b, "leader"), time.Hour); err != nil {
		t.Fatal(err)
	}
	rd := mustCreate(t, b, runtime("d"))
	next, err := b.ChangesAfter(ctx, 0, 0)
	if err != nil || len(next) != 1 || next[0].ResourceID != rd.ID || next[0].Seq <= all[2].Seq {
		t.Fatalf("change after pruning the log = %+v, %v; want d's with a seq above %d", next, err, all[2].Seq)
	}
}

// waitResult runs l.Wait(ctx) in a goroutine and returns the channel its result arrives on.
func waitResult(ctx context.Context, l domain.ChangeListener) <-chan error {
	done := make(chan error, 1)
	go func() { done <- l.Wait(ctx) }()
	return done
}

func receive(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(testTimeout):
		t.Fatal("Wait did not return")
		return nil
	}
}

func listen(t *testing.T, st domain.ChangeLog) domain.ChangeListener {
	t.Helper()
	l, err := st.ListenChanges(testContext(t))
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func testListenerWakesOnChange(t *testing.T, b *Backend) {
	ctx := testContext(t)
	l := listen(t, b)
	done := waitResult(ctx, l)
	mustCreate(t, b, runtime("web"))
	if err := receive(t, done); err != nil {
		t.Fatalf("wait after a change: %v", err)
	}

	expired, cancel := context.WithCancel(ctx)
	cancel()
	if err := l.Wait(expired); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait with an ended context: err = %v, want context.Canceled", err)
	}
	done = waitResult(ctx, l)
	mustCreate(t, b, runtime("another"))
	if err := receive(t, done); err != nil {
		t.Fatalf("wait after an ended context and a change: %v", err)
	}
}

// A listener wakes for changes made by another agent or CLI on the same database, and by
// plain SQL.
func testListenerWakesOnOtherWriters(t *testing.T, b *Backend) {
	ctx := testContext(t)
	other := b.Reopen(t)
	l := listen(t, b)

	done := waitResult(ctx, l)
	mustCreate(t, other, runtime("from-another-agent"))
	if err := receive(t, done); err != nil {
		t.Fatalf("wait for another agent's change: %v", err)
	}
	done = waitResult(ctx, l)
	mustExec(t, b, `INSERT INTO resources (type, name) VALUES ('runtime', 'from-sql')`)
	if err := receive(t, done); err != nil {
		t.Fatalf("wait for a change made with SQL: %v", err)
	}
}

func testListenerCloseInterruptsWait(t *testing.T, b *Backend) {
	ctx := testContext(t)
	l := listen(t, b)
	done := waitResult(ctx, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := receive(t, done); err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait interrupted by close: err = %v, want the listener-closed error", err)
	}
	if err := l.Wait(ctx); err == nil {
		t.Fatal("wait on a closed listener returned nil")
	}
	if err := l.Close(); err != nil {
		t.Fatalf("close again: %v", err)
	}
}

// NewestChanges reads the log's newest entries ahead of a cursor, and marks those whose
// owner has no entry between the cursor and them, within reach of the cursor.
func testNewestChanges(t *testing.T, b *Backend) {
	ctx := testContext(t)
	cursor := latestSeq(t, b)
	owned := func(name, owner string) domain.Resource {
		t.Helper()
		return mustCreate(t, b, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: name, Owner: owner})
	}
	a1, a2 := owned("a1", "alice"), owned("a2", "alice")
	a3, b1, c1 := owned("a3", "alice"), owned("b1", "bob"), owned("c1", "carol")
	all, err := b.ChangesAfter(ctx, cursor, 0)
	if err != nil || len(all) != 5 {
		t.Fatalf("changes after %d = %+v, %v; want the 5 just made", cursor, all, err)
	}
	type entry struct {
		id    string
		first bool
	}
	newest := func(cursor, after int64, limit, reach int) []entry {
		t.Helper()
		got, err := b.NewestChanges(ctx, cursor, after, limit, reach)
		if err != nil {
			t.Fatalf("newest changes (cursor %d, after %d, limit %d, reach %d): %v", cursor, after, limit, reach, err)
		}
		out := make([]entry, len(got))
		for i, c := range got {
			out[i] = entry{c.ResourceID, c.OwnerFirst}
			if c.Owner == "" {
				t.Errorf("entry %+v has no owner", c)
			}
		}
		return out
	}
	want := func(what string, got []entry, w ...entry) {
		t.Helper()
		if len(got) != len(w) {
			t.Fatalf("%s = %+v, want %+v", what, got, w)
		}
		for i := range w {
			if got[i] != w[i] {
				t.Fatalf("%s = %+v, want %+v", what, got, w)
			}
		}
	}

	// The newest three: alice has a1 and a2 between the cursor and a3, bob and carol none.
	want("newest 3", newest(cursor, cursor, 3, 100),
		entry{a3.ID, false}, entry{b1.ID, true}, entry{c1.ID, true})
	// All five: nothing lies between the cursor and them, so each is its owner's first.
	want("newest 10", newest(cursor, cursor, 10, 100),
		entry{a1.ID, true}, entry{a2.ID, true}, entry{a3.ID, true}, entry{b1.ID, true}, entry{c1.ID, true})
	// after skips the entries read before; the cursor still decides what lies between.
	want("newest after b1", newest(cursor, all[3].Seq, 3, 100), entry{c1.ID, true})
	want("newest 2 after a1", newest(cursor, all[0].Seq, 2, 100), entry{b1.ID, true}, entry{c1.ID, true})
	// Out of reach: the oldest read lies more than reach past the cursor.
	reach := int(all[3].Seq - cursor)
	want("newest 2, within reach", newest(cursor, cursor, 2, reach), entry{b1.ID, true}, entry{c1.ID, true})
	want("newest 2, out of reach", newest(cursor, cursor, 2, reach-1), entry{b1.ID, false}, entry{c1.ID, false})
	// A cursor past bob's and carol's: nothing newer.
	want("nothing newer", newest(all[4].Seq, all[4].Seq, 10, 100))
	// A change of alice's after carol's: a1..a3 lie between the cursor and it.
	if _, err := b.UpdateResourceArgs(ctx, a1.ID, map[string]any{"v": 2}); err != nil {
		t.Fatal(err)
	}
	want("alice's newest", newest(cursor, all[4].Seq, 10, 100), entry{a1.ID, false})
	want("alice's newest, cursor past hers", newest(all[2].Seq, all[4].Seq, 10, 100), entry{a1.ID, true})
}
