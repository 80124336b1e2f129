package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/postgres"
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
