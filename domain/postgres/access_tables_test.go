package postgres

import (
	"context"
	"slices"
	"testing"
	"time"
)

// Every table of the schema is in the list a client role is granted reading or in the list
// of those it may not read, so a new table is not forgotten by `berth migrate --client-role`.
func TestClientReadableTablesAreTheSchemasTables(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := migratedState(ctx, t)
	var tables []string
	if err := st.pool.QueryRow(ctx, `
		SELECT array_agg(tablename::text ORDER BY tablename) FROM pg_tables WHERE schemaname = current_schema()`).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	listed := slices.Sorted(slices.Values(append(slices.Clone(clientReadableTables), agentOnlyTables...)))
	if !slices.Equal(listed, tables) {
		t.Fatalf("client-readable and agent-only tables %v, the schema's tables %v: add a new table to clientReadableTables or agentOnlyTables", listed, tables)
	}
}
