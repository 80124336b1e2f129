package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/internal/backend"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationLockKey is the pg_advisory_xact_lock key every Migrate transaction takes first, so
// concurrent agent starts apply each migration once. ("berth-mg" in ASCII.)
const migrationLockKey int64 = 0x62657274682d6d67

// embeddedMigrations are the migrations this build applies; the newest is the schema
// version it knows.
func embeddedMigrations() ([]backend.Migration, error) {
	return backend.EmbeddedMigrations(migrationFiles, "migrations")
}

// Migrate applies the embedded migrations the database lacks. It is idempotent and safe to
// call from several processes at once. On a schema newer than this build knows it applies
// nothing and gives a *domain.SchemaTooNewError: this build's migrations are not the
// newer build's, and running them could only undo what it did.
func (s *State) Migrate(ctx context.Context) error {
	if err := s.checkAgentRole(ctx); err != nil {
		return err
	}
	return s.migrateTo(ctx, 0)
}

// migrateTo applies the embedded migrations up to version (0: all) the database lacks.
// Each transaction checks the schema is not newer than this build knows under the
// migration lock, so a newer build's Migrate running at the same time is seen.
func (s *State) migrateTo(ctx context.Context, version int) error {
	migrations, err := embeddedMigrations()
	if err != nil {
		return err
	}
	known := backend.KnownVersion(migrations)
	err = s.inLockedTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    int PRIMARY KEY,
			applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return err
		}
		return checkSchemaIn(ctx, tx, known)
	})
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	changed := false
	for _, m := range migrations {
		if version > 0 && m.Version > version {
			break
		}
		err := s.inLockedTx(ctx, func(tx pgx.Tx) error {
			if err := checkSchemaIn(ctx, tx, known); err != nil {
				return err
			}
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
			changed = true
			return err
		})
		if err != nil {
			return fmt.Errorf("migrate: apply %s: %w", m.Name, err)
		}
	}
	if changed && s.warm {
		if err := s.rewarm(ctx); err != nil {
			return fmt.Errorf("migrate: warm the connections on the new schema: %w", err)
		}
	}
	return nil
}

// inLockedTx runs f in a transaction holding the migration lock. A migration may rewrite
// whole tables: its statements may scan them (Plans in the package doc).
func (s *State) inLockedTx(ctx context.Context, f func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1), set_config('`+keyedPlansParam+`', 'on', true)`, migrationLockKey); err != nil {
			return fmt.Errorf("take migration lock: %w", err)
		}
		return f(tx)
	})
}

// CheckSchema reads the database's schema version and compares it with the one this build
// knows.
func (s *State) CheckSchema(ctx context.Context) (domain.SchemaVersions, error) {
	v := domain.SchemaVersions{Known: s.schema}
	if err := s.pool.QueryRow(ctx, backend.SchemaVersionSQL).Scan(&v.Database); err != nil {
		return v, fmt.Errorf("read the schema version: %w", err)
	}
	return v, v.Err()
}

// checkSchemaIn gives a *domain.SchemaTooNewError when the schema tx sees is newer than
// known.
func checkSchemaIn(ctx context.Context, tx pgx.Tx, known int) error {
	v := domain.SchemaVersions{Known: known}
	if err := tx.QueryRow(ctx, backend.SchemaVersionSQL).Scan(&v.Database); err != nil {
		return fmt.Errorf("read the schema version: %w", err)
	}
	return v.Err()
}

// schemaError is the error of a fenced write that matched no row: a *domain.SchemaTooNewError
// when the schema is newer than this build knows (the fence refused it), else nil (the
// write's own guards did).
func (s *State) schemaError(ctx context.Context) error {
	_, err := s.CheckSchema(ctx)
	if errors.Is(err, domain.ErrSchemaTooNew) {
		return err
	}
	return nil
}
