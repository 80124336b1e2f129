package postgres

import (
	"context"
	"testing"
	"time"
)

// 0018 turns row security on for owner_quotas when the database had owner isolation on
// already, so that upgrading does not show a client every owner's quotas.
func TestQuotasMigrationKeepsOwnerIsolationOn(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := migratedStateAt(ctx, t, 16)
	// What berth access isolation on did, before 0018.
	if _, err := st.pool.Exec(ctx, `ALTER TABLE resources ENABLE ROW LEVEL SECURITY`); err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var on bool
	if err := st.pool.QueryRow(ctx, `SELECT relrowsecurity FROM pg_class WHERE oid = 'owner_quotas'::regclass`).Scan(&on); err != nil || !on {
		t.Fatalf("owner_quotas row security = %v, %v; want on", on, err)
	}
}
