package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"

	"github.com/berth-dev/berth/domain/internal/backend"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrate applies the embedded migrations the database lacks, each in its own transaction.
// It is idempotent and safe to call from several processes at once: every transaction holds
// the write lock from its start and re-reads schema_migrations under it.
func (s *State) Migrate(ctx context.Context) error {
	return s.migrateTo(ctx, 0)
}

// migrateTo applies the embedded migrations up to version (0: all) the database lacks.
func (s *State) migrateTo(ctx context.Context, version int) error {
	migrations, err := backend.LoadMigrations(migrationFiles, "migrations")
	if err != nil {
		return err
	}
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    INTEGER NOT NULL PRIMARY KEY,
			applied_at TEXT NOT NULL DEFAULT (`+nowSQL+`))`)
		return err
	})
	if err != nil {
		return fmt.Errorf("migrate: create schema_migrations: %w", err)
	}
	for _, m := range migrations {
		if version > 0 && m.Version > version {
			break
		}
		err := s.inTx(ctx, func(tx *sql.Tx) error {
			var applied bool
			if err := tx.QueryRowContext(ctx,
				backend.MigrationAppliedSQL, m.Version,
			).Scan(&applied); err != nil {
				return err
			}
			if applied {
				return nil
			}
			if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, backend.RecordMigrationSQL, m.Version)
			return err
		})
		if err != nil {
			return fmt.Errorf("migrate: apply %s: %w", m.Name, err)
		}
	}
	return nil
}
