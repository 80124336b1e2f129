// Package postgrestest gives gocheck suites outside the postgres package a migrated
// PostgreSQL State on a fresh database of their own (the package's own tests use pgtest).
package postgrestest

import (
	"context"
	"fmt"

	"github.com/berth-dev/berth/domain/postgres"
	"github.com/berth-dev/berth/internal/pgtest"
)

// New creates a database, opens a State on it and migrates it. The returned function closes
// the State and drops the database.
func New(ctx context.Context) (*postgres.State, func(), error) {
	url, drop, err := pgtest.CreateDatabase(ctx)
	if err != nil {
		return nil, nil, err
	}
	st, err := postgres.Open(ctx, url, postgres.PoolConfig{})
	if err != nil {
		drop()
		return nil, nil, err
	}
	if err := st.Migrate(ctx); err != nil {
		st.Close()
		drop()
		return nil, nil, fmt.Errorf("migrate the test database: %w", err)
	}
	return st, func() {
		st.Close()
		drop()
	}, nil
}
