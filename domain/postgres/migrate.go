package postgres

import (
	"context"
	"embed"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/berth-dev/berth/domain/internal/backend"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationLockKey is the pg_advisory_xact_lock key every Migrate transaction takes first, so
// concurrent agent starts apply each migration once. ("berth-mg" in ASCII.)
const migrationLockKey int64 = 0x62657274682d6d67

// Migrate applies the embedded migrations the database lacks. It is idempotent and safe to
// call from several processes at once.
func (s *State) Migrate(ctx context.Context) error {
	if err := s.checkAgentRole(ctx); err != nil {
		return err
	}
	return s.migrateTo(ctx, 0)
}

// migrateTo applies the embedded migrations up to version (0: all) the database lacks.
func (s *State) migrateTo(ctx context.Context, version int) error {
	migrations, err := backend.LoadMigrations(migrationFiles, "migrations")
	if err != nil {
		return err
	}
	err = s.inLockedTx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    int PRIMARY KEY,
			applied_at timestamptz NOT NULL DEFAULT now())`)
		return err
	})
	if err != nil {
		return fmt.Errorf("migrate: create schema_migrations: %w", err)
	}
	for _, m := range migrations {
		if version > 0 && m.Version > version {
			break
		}
		err := s.inLockedTx(ctx, func(tx pgx.Tx) error {
			var applied bool
			if err := tx.QueryRow(ctx,
				backend.MigrationAppliedSQL, m.Version,
			).Scan(&applied); err != nil {
				return err
			}
			if applied {
				return nil
			}
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, backend.RecordMigrationSQL, m.Version)
			return err
		})
		if err != nil {
			return fmt.Errorf("migrate: apply %s: %w", m.Name, err)
		}
	}
	return nil
}

// inLockedTx runs f in a transaction holding the migration lock.
func (s *State) inLockedTx(ctx context.Context, f func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLockKey); err != nil {
			return fmt.Errorf("take migration lock: %w", err)
		}
		return f(tx)
	})
}
