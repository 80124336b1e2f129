package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/postgres"
)

func TestChangeLog(t *testing.T) {
	st := newState(t)
	ctx := testContext(t)
	if seq := latestSeq(t, st); seq != 0 {
		t.Fatalf("latest seq of an empty log = %d, want 0", seq)
	}
	a := mustCreate(t, st, runtime("a"))
	b := mustCreate(t, st, runtime("b"))
	c := mustCreate(t, st, runtime("c"))
	all, err := st.ChangesAfter(ctx, 0, 0)
	if err != nil || len(all) != 3 || all[0].ResourceID != a.ID || all[1].ResourceID != b.ID || all[2].ResourceID != c.ID {
		t.Fatalf("all changes = %+v, %v; want a, b, c in order", all, err)
	}
	if latest := latestSeq(t, st); latest != all[2].Seq {
		t.Fatalf("latest seq = %d, want %d", latest, all[2].Seq)
	}
	page, err := st.ChangesAfter(ctx, all[0].Seq, 1)
	if err != nil || len(page) != 1 || page[0] != all[1] {
		t.Fatalf("one change after %d = %+v, %v; want %+v", all[0].Seq, page, err, all[1])
	}
	in, err := st.ChangesIn(ctx, []int64{all[2].Seq, all[0].Seq, all[2].Seq + 100})
	if err != nil || len(in) != 2 || in[0] != all[0] || in[1] != all[2] {
		t.Fatalf("changes in = %+v, %v; want the two that exist, in order", in, err)
	}

	mustExec(t, st, `UPDATE change_log SET created_at = now() - interval '2 hours' WHERE seq <= $1`, all[1].Seq)
	pruned, err := st.PruneChanges(ctx, time.Now().Add(-time.Hour))
	if err != nil || pruned != 2 {
		t.Fatalf("prune = %d, %v; want 2", pruned, err)
	}
	left, err := st.ChangesAfter(ctx, 0, 0)
	if err != nil || len(left) != 1 || left[0] != all[2] {
		t.Fatalf("after prune = %+v, %v; want only the newest", left, err)
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

func listen(t *testing.T, st *postgres.State) domain.ChangeListener {
	t.Helper()
	l, err := st.ListenChanges(testContext(t))
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func TestListenerWakesOnChange(t *testing.T) {
	st := newState(t)
	ctx := testContext(t)
	l := listen(t, st)
	done := waitResult(ctx, l)
	mustCreate(t, st, runtime("web"))
	if err := receive(t, done); err != nil {
		t.Fatalf("wait after a change: %v", err)
	}

	expired, cancel := context.WithCancel(ctx)
	cancel()
	if err := l.Wait(expired); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait with an ended context: err = %v, want context.Canceled", err)
	}
	done = waitResult(ctx, l)
	mustExec(t, st, `SELECT pg_notify('berth_resource_changes', '')`)
	if err := receive(t, done); err != nil {
		t.Fatalf("wait after an ended context and a notify: %v", err)
	}
}

func TestListenerBreaksWhenItsBackendDies(t *testing.T) {
	st := newState(t)
	ctx := testContext(t)
	l := listen(t, st)
	done := waitResult(ctx, l)
	if n := mustExec(t, st, `
		SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		 WHERE datname = current_database() AND query = 'LISTEN berth_resource_changes'`); n != 1 {
		t.Fatalf("terminated %d listening backends, want 1", n)
	}
	err := receive(t, done)
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait on a dead connection: err = %v, want a connection error", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("close a broken listener: %v", err)
	}

	fresh := listen(t, st)
	done = waitResult(ctx, fresh)
	mustCreate(t, st, runtime("web"))
	if err := receive(t, done); err != nil {
		t.Fatalf("wait on a new listener: %v", err)
	}
}

func TestListenerCloseInterruptsWait(t *testing.T) {
	st := newState(t)
	ctx := testContext(t)
	l := listen(t, st)
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
}
