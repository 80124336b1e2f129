package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/postgres"
	"github.com/berth-dev/berth/internal/pgtest"
)

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

// A NOTIFY on the channel from any session wakes the listener, also after a Wait that ended
// with its context.
func TestListenerWakesOnNotify(t *testing.T) {
	st := newState(t)
	ctx := testContext(t)
	l := listen(t, st)
	expired, cancel := context.WithCancel(ctx)
	cancel()
	if err := l.Wait(expired); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait with an ended context: err = %v, want context.Canceled", err)
	}
	done := waitResult(ctx, l)
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

// The change log's reads wake every reconcile, so they run on a connection of their own:
// with every connection of the main pool held by transactions, they still answer at once.
func TestChangeLogReadsDoNotWaitForTheMainPool(t *testing.T) {
	ctx := testContext(t)
	st, err := postgres.Open(ctx, pgtest.New(t), postgres.PoolConfig{MaxConns: 1})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(st.Close)
	if err := st.Migrate(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	r := mustCreate(t, st, runtime("woken"))
	held, err := st.Pool().Acquire(ctx)
	if err != nil {
		t.Fatalf("hold the main pool's only connection: %v", err)
	}
	defer held.Release()

	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	latest, err := st.LatestChangeSeq(short)
	if err != nil {
		t.Fatalf("latest change with the main pool held: %v", err)
	}
	changes, err := st.ChangesAfter(short, 0, 0)
	if err != nil {
		t.Fatalf("changes after 0 with the main pool held: %v", err)
	}
	if len(changes) != 1 || changes[0].ResourceID != r.ID || changes[0].Seq != latest {
		t.Fatalf("changes = %+v, want the one entry of %s at seq %d", changes, r.ID, latest)
	}
	in, err := st.ChangesIn(short, []int64{latest})
	if err != nil || len(in) != 1 || in[0].ResourceID != r.ID {
		t.Fatalf("changes in [%d] with the main pool held = %+v, %v; want the entry of %s", latest, in, err, r.ID)
	}
}
