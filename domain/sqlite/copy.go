package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/berth-dev/berth/domain/internal/backend"
	"github.com/berth-dev/berth/domain/storecopy"
)

// The copy of a whole store (berth migrate-store): the source is read in one read
// transaction (a snapshot of the file), and the target written in one write transaction in
// which the copied tables' triggers are dropped and, before it commits, created again from
// the same SQL, so rows arrive as they were and no other connection ever sees the triggers
// gone. SQLite has no other way to keep a trigger from firing.

var _ storecopy.Store = (*State)(nil)

// Export runs f on a read transaction: a snapshot of the file for as long as f runs.
func (s *State) Export(ctx context.Context, f func(storecopy.View) error) error {
	tx, err := s.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if err := checkCopySchema(ctx, tx); err != nil {
		return err
	}
	return f(copyView{tx: tx})
}

// Import runs f in one write transaction (which holds the file's write lock) with the copied
// tables' triggers dropped, recomputes the slot usage the reservations' triggers would have
// kept, and creates the triggers again before committing.
func (s *State) Import(ctx context.Context, f func(storecopy.Importer) error) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if err := checkCopySchema(ctx, tx); err != nil {
			return err
		}
		triggers, err := copiedTriggers(ctx, tx)
		if err != nil {
			return err
		}
		for _, t := range triggers {
			if _, err := tx.ExecContext(ctx, `DROP TRIGGER `+quoteIdent(t.name)); err != nil {
				return fmt.Errorf("set trigger %s aside: %w", t.name, err)
			}
		}
		if err := f(copyImporter{copyView{tx: tx}}); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, rebuildSlotUsage); err != nil {
			return fmt.Errorf("recompute the slot usage from the copied reservations: %w", err)
		}
		for _, t := range triggers {
			if _, err := tx.ExecContext(ctx, t.sql); err != nil {
				return fmt.Errorf("create trigger %s again: %w", t.name, err)
			}
		}
		return nil
	})
}

// checkCopySchema checks the database is at this build's schema version.
func checkCopySchema(ctx context.Context, tx *sql.Tx) error {
	migrations, err := backend.LoadMigrations(migrationFiles, "migrations")
	if err != nil {
		return err
	}
	var have int
	err = tx.QueryRowContext(ctx, backend.SchemaVersionSQL).Scan(&have)
	if IsMissingTable(err) {
		have, err = 0, nil
	}
	if err != nil {
		return fmt.Errorf("read the schema version: %w", err)
	}
	return storecopy.CheckSchemaVersion(have, migrations[len(migrations)-1].Version)
}

type trigger struct {
	name, sql string
}

// copiedTriggers returns the triggers on the copied tables, with the SQL that created them.
func copiedTriggers(ctx context.Context, tx *sql.Tx) ([]trigger, error) {
	tables := make([]string, len(storecopy.AllTables))
	args := make([]any, len(storecopy.AllTables))
	for i, t := range storecopy.AllTables {
		tables[i] = fmt.Sprintf("$%d", i+1)
		args[i] = string(t)
	}
	rows, err := tx.QueryContext(ctx, `
		SELECT name, sql FROM sqlite_schema
		 WHERE type = 'trigger' AND tbl_name IN (`+strings.Join(tables, ", ")+`)
		 ORDER BY name`, args...)
	if err != nil {
		return nil, fmt.Errorf("list the tables' triggers: %w", err)
	}
	defer rows.Close()
	var out []trigger
	for rows.Next() {
		var t trigger
		if err := rows.Scan(&t.name, &t.sql); err != nil {
			return nil, fmt.Errorf("list the tables' triggers: %w", err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

func quoteIdent(name string) string {
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

// copyView reads the tables inside a transaction.
type copyView struct {
	tx *sql.Tx
}

func (v copyView) Count(ctx context.Context) (storecopy.Counts, error) {
	counts := make([]string, len(storecopy.AllTables))
	for i, t := range storecopy.AllTables {
		counts[i] = `(SELECT count(*) FROM ` + quoteIdent(string(t)) + `)`
	}
	values := make([]int64, len(storecopy.AllTables))
	dest := make([]any, len(values))
	for i := range values {
		dest[i] = &values[i]
	}
	if err := v.tx.QueryRowContext(ctx, `SELECT `+strings.Join(counts, ", ")).Scan(dest...); err != nil {
		return nil, err
	}
	out := storecopy.Counts{}
	for i, t := range storecopy.AllTables {
		out[t] = values[i]
	}
	return out, nil
}

func (v copyView) Read(ctx context.Context, emit func(storecopy.Batch) error) error {
	if err := readTable(ctx, v.tx, emit, storecopy.Resources.ReadQuery(readColumn),
		func(rows *sql.Rows) (r storecopy.Resource, err error) {
			var (
				lease                                       sql.NullString
				next, leaseExpires, ready, unhealthy, retry sql.NullString
				waitingSince, lastAttempt                   sql.NullString
				created, updated, statusChanged             string
				admittedProvisioner                         sql.NullString
				admittedUnits                               sql.NullInt64
			)
			if err = rows.Scan(&r.ID, &r.Type, &r.Name, &r.Owner, &r.Provisioner, &r.Args, &r.Generation,
				&r.ObservedGeneration, &r.Status, &r.StatusMessage, &r.State, &r.Config, &r.Attempts,
				&next, &r.LastError, &lease, &leaseExpires, &r.LeaseToken, &created, &updated, &ready, &unhealthy,
				&r.Labels, &r.Paused, &r.Hibernate, &retry, &statusChanged, &r.Reason, &waitingSince, &lastAttempt,
				&admittedProvisioner, &admittedUnits); err != nil {
				return r, err
			}
			if lease.Valid {
				r.LeaseHolder = &lease.String
			}
			if admittedProvisioner.Valid {
				r.AdmittedProvisioner = &admittedProvisioner.String
			}
			r.AdmittedUnits = optionalInt(admittedUnits)
			t := timeReader{}
			r.NextAttemptAt = t.optional("next_attempt_at", next)
			r.LeaseExpiresAt = t.optional("lease_expires_at", leaseExpires)
			r.CreatedAt = t.required("created_at", created)
			r.UpdatedAt = t.required("updated_at", updated)
			r.ReadyAt = t.optional("ready_at", ready)
			r.UnhealthySince = t.optional("unhealthy_since", unhealthy)
			r.RetryRequestedAt = t.optional("retry_requested_at", retry)
			r.StatusChangedAt = t.required("status_changed_at", statusChanged)
			r.WaitingSince = t.optional("waiting_since", waitingSince)
			r.LastAttemptAt = t.optional("last_attempt_at", lastAttempt)
			return r, t.err
		},
		func(rows []storecopy.Resource) storecopy.Batch { return storecopy.Batch{Resources: rows} },
	); err != nil {
		return err
	}
	if err := readTable(ctx, v.tx, emit, storecopy.Reservations.ReadQuery(readColumn),
		func(rows *sql.Rows) (r storecopy.Reservation, err error) {
			var created, updated string
			if err = rows.Scan(&r.Provisioner, &r.ResourceID, &r.Owner, &r.Host, &r.Slots, &created, &updated); err != nil {
				return r, err
			}
			t := timeReader{}
			r.CreatedAt = t.required("created_at", created)
			r.UpdatedAt = t.required("updated_at", updated)
			return r, t.err
		},
		func(rows []storecopy.Reservation) storecopy.Batch { return storecopy.Batch{Reservations: rows} },
	); err != nil {
		return err
	}
	if err := readTable(ctx, v.tx, emit, storecopy.Events.ReadQuery(readColumn),
		func(rows *sql.Rows) (r storecopy.Event, err error) {
			var at string
			if err = rows.Scan(&r.Seq, &r.ResourceID, &at, &r.Kind, &r.Status, &r.Message); err != nil {
				return r, err
			}
			t := timeReader{}
			r.At = t.required("at", at)
			return r, t.err
		},
		func(rows []storecopy.Event) storecopy.Batch { return storecopy.Batch{Events: rows} },
	); err != nil {
		return err
	}
	if err := readTable(ctx, v.tx, emit, storecopy.Changes.ReadQuery(readColumn),
		func(rows *sql.Rows) (r storecopy.Change, err error) {
			var created string
			if err = rows.Scan(&r.Seq, &r.ResourceID, &created, &r.Owner); err != nil {
				return r, err
			}
			t := timeReader{}
			r.CreatedAt = t.required("created_at", created)
			return r, t.err
		},
		func(rows []storecopy.Change) storecopy.Batch { return storecopy.Batch{Changes: rows} },
	); err != nil {
		return err
	}
	if err := readTable(ctx, v.tx, emit, storecopy.CapacitySamples.ReadQuery(readColumn),
		func(rows *sql.Rows) (r storecopy.CapacitySample, err error) {
			var at string
			if err = rows.Scan(&at, &r.Provisioner, &r.Host, &r.Unit, &r.Total, &r.Used, &r.Down); err != nil {
				return r, err
			}
			t := timeReader{}
			r.At = t.required("at", at)
			return r, t.err
		},
		func(rows []storecopy.CapacitySample) storecopy.Batch { return storecopy.Batch{CapacitySamples: rows} },
	); err != nil {
		return err
	}
	if err := readTable(ctx, v.tx, emit, storecopy.CapacityWarnings.ReadQuery(readColumn),
		func(rows *sql.Rows) (r storecopy.CapacityWarning, err error) {
			var since, updated string
			if err = rows.Scan(&r.Provisioner, &r.Kind, &r.Active, &r.Message, &since, &updated); err != nil {
				return r, err
			}
			t := timeReader{}
			r.Since = t.required("since", since)
			r.UpdatedAt = t.required("updated_at", updated)
			return r, t.err
		},
		func(rows []storecopy.CapacityWarning) storecopy.Batch { return storecopy.Batch{CapacityWarnings: rows} },
	); err != nil {
		return err
	}
	if err := readTable(ctx, v.tx, emit, storecopy.ProvisionerSpecs.ReadQuery(readColumn),
		func(rows *sql.Rows) (r storecopy.ProvisionerSpec, err error) {
			var applied string
			if err = rows.Scan(&r.Provisioner, &r.Fingerprint, &applied); err != nil {
				return r, err
			}
			t := timeReader{}
			r.AppliedAt = t.required("applied_at", applied)
			return r, t.err
		},
		func(rows []storecopy.ProvisionerSpec) storecopy.Batch { return storecopy.Batch{ProvisionerSpecs: rows} },
	); err != nil {
		return err
	}
	if err := readTable(ctx, v.tx, emit, storecopy.OwnerPolicies.ReadQuery(readColumn),
		func(rows *sql.Rows) (r storecopy.OwnerPolicy, err error) {
			var updated string
			if err = rows.Scan(&r.Owner, &r.Weight, &r.Class, &updated); err != nil {
				return r, err
			}
			t := timeReader{}
			r.UpdatedAt = t.required("updated_at", updated)
			return r, t.err
		},
		func(rows []storecopy.OwnerPolicy) storecopy.Batch { return storecopy.Batch{OwnerPolicies: rows} },
	); err != nil {
		return err
	}
	return readTable(ctx, v.tx, emit, storecopy.OwnerQuotas.ReadQuery(readColumn),
		func(rows *sql.Rows) (r storecopy.OwnerQuota, err error) {
			var (
				maxResources, maxSlots sql.NullInt64
				updated                string
			)
			if err = rows.Scan(&r.Owner, &r.Provisioner, &maxResources, &maxSlots, &updated); err != nil {
				return r, err
			}
			r.MaxResources, r.MaxSlots = optionalInt(maxResources), optionalInt(maxSlots)
			t := timeReader{}
			r.UpdatedAt = t.required("updated_at", updated)
			return r, t.err
		},
		func(rows []storecopy.OwnerQuota) storecopy.Batch { return storecopy.Batch{OwnerQuotas: rows} },
	)
}

// optionalInt is an INTEGER column's value, nil for NULL.
func optionalInt(v sql.NullInt64) *int64 {
	if !v.Valid {
		return nil
	}
	return &v.Int64
}

// timeReader parses a row's time columns and keeps the first error.
type timeReader struct {
	err error
}

func (r *timeReader) required(column, s string) time.Time {
	t, err := parseTime(column, s)
	if err != nil && r.err == nil {
		r.err = err
	}
	return t
}

func (r *timeReader) optional(column string, s sql.NullString) *time.Time {
	t, err := parseOptionalTime(column, s)
	if err != nil && r.err == nil {
		r.err = err
	}
	return t
}

// readTable runs query and hands its rows to emit in batches of storecopy.BatchSize.
func readTable[T any](ctx context.Context, tx *sql.Tx, emit func(storecopy.Batch) error, query string,
	scan func(*sql.Rows) (T, error), batch func([]T) storecopy.Batch) error {
	rows, err := tx.QueryContext(ctx, query)
	if err != nil {
		return err
	}
	defer rows.Close()
	return backend.EmitRows(rows, scan, batch, emit)
}

// sequenced are the AUTOINCREMENT tables, with what Positions calls each one's position.
var sequenced = []struct {
	table string
	pos   func(*storecopy.Positions) *int64
}{
	{"change_log", func(p *storecopy.Positions) *int64 { return &p.ChangeLog }},
	{"resource_events", func(p *storecopy.Positions) *int64 { return &p.Events }},
}

func (v copyView) Positions(ctx context.Context) (storecopy.Positions, error) {
	var p storecopy.Positions
	for _, s := range sequenced {
		if err := v.tx.QueryRowContext(ctx,
			`SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = $1), 0)`, s.table,
		).Scan(s.pos(&p)); err != nil {
			return p, fmt.Errorf("read the sequence of %s: %w", s.table, err)
		}
	}
	return p, nil
}

// copyImporter writes rows inside Import's transaction.
type copyImporter struct {
	copyView
}

func (im copyImporter) Write(ctx context.Context, b storecopy.Batch) error {
	t := b.Table()
	if t == "" {
		return nil
	}
	columns := t.Columns()
	params := make([]string, len(columns))
	for i := range params {
		params[i] = fmt.Sprintf("$%d", i+1)
	}
	stmt, err := im.tx.PrepareContext(ctx, `INSERT INTO `+quoteIdent(string(t))+` (`+strings.Join(columns, ", ")+`)
		VALUES (`+strings.Join(params, ", ")+`)`)
	if err != nil {
		return err
	}
	defer stmt.Close()
	for _, row := range b.Values() {
		for i, v := range row {
			row[i] = storedValue(v)
		}
		if _, err := stmt.ExecContext(ctx, row...); err != nil {
			return describeDBError(err)
		}
	}
	return nil
}

// storedValue is v in the form the database stores it: times as FormatTime's text.
func storedValue(v any) any {
	switch v := v.(type) {
	case time.Time:
		return FormatTime(v)
	case *time.Time:
		return optionalTime(v)
	}
	return v
}

// SetPositions records in sqlite_sequence, AUTOINCREMENT's own table, that p's sequence
// numbers were handed out (inserting rows with their seq already recorded theirs).
func (im copyImporter) SetPositions(ctx context.Context, p storecopy.Positions) error {
	for _, s := range sequenced {
		pos := *s.pos(&p)
		res, err := im.tx.ExecContext(ctx, `UPDATE sqlite_sequence SET seq = max(seq, $2) WHERE name = $1`, s.table, pos)
		if err != nil {
			return fmt.Errorf("set the sequence of %s: %w", s.table, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("set the sequence of %s: %w", s.table, err)
		}
		if n > 0 || pos == 0 {
			continue
		}
		if _, err := im.tx.ExecContext(ctx, `INSERT INTO sqlite_sequence (name, seq) VALUES ($1, $2)`, s.table, pos); err != nil {
			return fmt.Errorf("set the sequence of %s: %w", s.table, err)
		}
	}
	return nil
}

// readColumn is how a View reads a column: as it is, since SQLite keeps ids and JSON as
// text already.
func readColumn(name string) string { return name }
