package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"strings"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/internal/backend"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// embeddedMigrations are the migrations this build applies; the newest is the schema
// version it knows.
func embeddedMigrations() ([]backend.Migration, error) {
	return backend.EmbeddedMigrations(migrationFiles, "migrations")
}

// Migrate applies the embedded migrations the database lacks, each in its own transaction.
// It is idempotent and safe to call from several processes at once: every transaction holds
// the write lock from its start and re-reads schema_migrations under it. On a schema newer
// than this build knows it applies nothing and gives a *domain.SchemaTooNewError: this
// build's migrations are not the newer build's, and running them could only undo what it
// did.
func (s *State) Migrate(ctx context.Context) error {
	return s.migrateTo(ctx, 0)
}

// migrateTo applies the embedded migrations up to version (0: all) the database lacks.
// Each transaction checks the schema is not newer than this build knows under the write
// lock, so a newer build's Migrate running at the same time is seen.
func (s *State) migrateTo(ctx context.Context, version int) error {
	migrations, err := embeddedMigrations()
	if err != nil {
		return err
	}
	known := backend.KnownVersion(migrations)
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    INTEGER NOT NULL PRIMARY KEY,
			applied_at TEXT NOT NULL DEFAULT (`+nowSQL+`))`); err != nil {
			return err
		}
		return checkSchemaIn(ctx, tx, known)
	})
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	for _, m := range migrations {
		if version > 0 && m.Version > version {
			break
		}
		err := s.inTx(ctx, func(tx *sql.Tx) error {
			if err := checkSchemaIn(ctx, tx, known); err != nil {
				return err
			}
			var applied bool
			if err := tx.QueryRowContext(ctx,
				backend.MigrationAppliedSQL, m.Version,
			).Scan(&applied); err != nil {
				return err
			}
			if applied {
				return nil
			}
			if err := applyHoldingTriggers(ctx, tx, m.SQL); err != nil {
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

// holdTriggersDirective, at the start of a line of a migration and followed by trigger
// names, has the migration run without those triggers: SQLite cannot disable a trigger as
// PostgreSQL does (ALTER TABLE ... DISABLE TRIGGER), so that a backfill is no change of the
// rows (updated_at kept, no event) without the migration repeating the triggers' text.
const holdTriggersDirective = "-- berth:hold-triggers "

// applyHoldingTriggers runs migration in tx, with the triggers its holdTriggersDirective
// lines name dropped while it runs and created again, as they were, after it.
func applyHoldingTriggers(ctx context.Context, tx *sql.Tx, migration string) error {
	var held []string
	for _, line := range strings.Split(migration, "\n") {
		if names, ok := strings.CutPrefix(line, holdTriggersDirective); ok {
			held = append(held, strings.Fields(names)...)
		}
	}
	saved := make([]string, len(held))
	for i, name := range held {
		if err := tx.QueryRowContext(ctx, `SELECT sql FROM sqlite_schema WHERE type = 'trigger' AND name = $1`, name).Scan(&saved[i]); err != nil {
			return fmt.Errorf("hold trigger %s: %w", name, err)
		}
		if _, err := tx.ExecContext(ctx, `DROP TRIGGER "`+name+`"`); err != nil {
			return fmt.Errorf("hold trigger %s: %w", name, err)
		}
	}
	if _, err := tx.ExecContext(ctx, migration); err != nil {
		return err
	}
	for i, name := range held {
		if _, err := tx.ExecContext(ctx, saved[i]); err != nil {
			return fmt.Errorf("restore trigger %s: %w", name, err)
		}
	}
	return nil
}

// CheckSchema reads the database's schema version and compares it with the one this build
// knows.
func (s *State) CheckSchema(ctx context.Context) (domain.SchemaVersions, error) {
	v := domain.SchemaVersions{Known: s.schema}
	if err := s.read.QueryRowContext(ctx, backend.SchemaVersionSQL).Scan(&v.Database); err != nil {
		return v, fmt.Errorf("read the schema version: %w", err)
	}
	return v, v.Err()
}

// checkSchemaIn gives a *domain.SchemaTooNewError when the schema q sees is newer than
// known.
func checkSchemaIn(ctx context.Context, q queryer, known int) error {
	v := domain.SchemaVersions{Known: known}
	if err := q.QueryRowContext(ctx, backend.SchemaVersionSQL).Scan(&v.Database); err != nil {
		return fmt.Errorf("read the schema version: %w", err)
	}
	return v.Err()
}
