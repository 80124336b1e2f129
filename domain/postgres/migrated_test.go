package postgres

import (
	"context"
	"testing"

	"github.com/berth-dev/berth/internal/pgtest"
)

// migratedState opens a migrated State on a fresh database of t's own, for the tests that
// reach into its pool; it is closed when t ends.
func migratedState(ctx context.Context, t *testing.T) *State {
	t.Helper()
	return migratedStateAt(ctx, t, 0)
}

// migratedStateAt is migratedState with the schema at version (0: the latest).
func migratedStateAt(ctx context.Context, t *testing.T, version int) *State {
	t.Helper()
	st, err := Open(ctx, pgtest.New(t), PoolConfig{})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(st.Close)
	if err := st.migrateTo(ctx, version); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return st
}
