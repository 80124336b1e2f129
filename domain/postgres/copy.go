package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/berth-dev/berth/domain/internal/backend"
	"github.com/berth-dev/berth/domain/storecopy"
)

// The copy of a whole store (berth migrate-store): the source is read in one repeatable-read
// snapshot, and the target written with COPY in one transaction in which the tables' user
// triggers are disabled, so rows arrive as they were; the triggers are enabled again before
// the transaction commits, so no other session ever sees them off.

var _ storecopy.Store = (*State)(nil)

// importLockTimeout is how long Import waits for the target's tables.
const importLockTimeout = "10s"

// Export runs f on a read-only snapshot of the database, whose tables it reads whole: with
// sequential scans allowed (Plans in the package doc).
func (s *State) Export(ctx context.Context, f func(storecopy.View) error) error {
	opts := pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}
	return pgx.BeginTxFunc(ctx, s.pool, opts, func(tx pgx.Tx) error {
		if err := checkCopySchema(ctx, tx); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, wholeTablePlansSQL); err != nil {
			return err
		}
		return f(copyView{tx: tx})
	})
}

// Import runs f in one transaction that holds the copied tables (and the slot usage derived
// from the reservations) in EXCLUSIVE mode (others may read them, not write) with their user
// triggers disabled, and recomputes the slot usage the reservations' trigger would have kept.
// It needs the privileges of the tables' owner (the user that ran berth migrate).
func (s *State) Import(ctx context.Context, f func(storecopy.Importer) error) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := checkCopySchema(ctx, tx); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '`+importLockTimeout+`'`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, wholeTablePlansSQL); err != nil { // it recomputes the usage from every reservation
			return err
		}
		if _, err := tx.Exec(ctx, `LOCK TABLE `+copiedTables()+`, slot_host_usage, slot_owner_usage IN EXCLUSIVE MODE`); err != nil {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == "55P03" { // lock_not_available
				return fmt.Errorf("the database's tables stayed in use for %s: stop every agent and command using it, then try again", importLockTimeout)
			}
			return fmt.Errorf("lock the tables: %w", err)
		}
		triggers, err := enabledTriggers(ctx, tx)
		if err != nil {
			return err
		}
		for _, t := range triggers {
			if _, err := tx.Exec(ctx, `ALTER TABLE `+t.table.Sanitize()+` DISABLE TRIGGER `+t.name.Sanitize()); err != nil {
				return fmt.Errorf("disable trigger %s of %s (the copy needs the privileges of the tables' owner, the user that ran berth migrate): %w",
					t.name.Sanitize(), t.table.Sanitize(), err)
			}
		}
		if err := f(copyImporter{copyView{tx: tx}}); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT berth_rebuild_slot_usage()`); err != nil {
			return fmt.Errorf("recompute the slot usage from the copied reservations: %w", err)
		}
		for _, t := range triggers {
			if _, err := tx.Exec(ctx, `ALTER TABLE `+t.table.Sanitize()+` ENABLE `+t.mode+`TRIGGER `+t.name.Sanitize()); err != nil {
				return fmt.Errorf("enable trigger %s of %s again: %w", t.name.Sanitize(), t.table.Sanitize(), err)
			}
		}
		return nil
	})
}

// checkCopySchema checks the database is at this build's schema version.
func checkCopySchema(ctx context.Context, tx pgx.Tx) error {
	migrations, err := backend.LoadMigrations(migrationFiles, "migrations")
	if err != nil {
		return err
	}
	var have int
	err = tx.QueryRow(ctx, backend.SchemaVersionSQL).Scan(&have)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table
		have, err = 0, nil
	}
	if err != nil {
		return fmt.Errorf("read the schema version: %w", err)
	}
	return storecopy.CheckSchemaVersion(have, migrations[len(migrations)-1].Version)
}

func copiedTables() string {
	names := make([]string, len(storecopy.AllTables))
	for i, t := range storecopy.AllTables {
		names[i] = pgx.Identifier{string(t)}.Sanitize()
	}
	return strings.Join(names, ", ")
}

// trigger is an enabled user trigger of a copied table; mode is how to enable it again
// ("", "ALWAYS " or "REPLICA ").
type trigger struct {
	table, name pgx.Identifier
	mode        string
}

func enabledTriggers(ctx context.Context, tx pgx.Tx) ([]trigger, error) {
	tables := make([]string, len(storecopy.AllTables))
	for i, t := range storecopy.AllTables {
		tables[i] = string(t)
	}
	rows, err := tx.Query(ctx, `
		SELECT n.nspname, c.relname, t.tgname, t.tgenabled::text
		  FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		 WHERE NOT t.tgisinternal AND t.tgenabled <> 'D' AND t.tgrelid = ANY ($1::text[]::regclass[])
		 ORDER BY c.relname, t.tgname`, tables)
	if err != nil {
		return nil, fmt.Errorf("list the tables' triggers: %w", err)
	}
	defer rows.Close()
	var out []trigger
	for rows.Next() {
		var schema, table, name, enabled string
		if err := rows.Scan(&schema, &table, &name, &enabled); err != nil {
			return nil, fmt.Errorf("list the tables' triggers: %w", err)
		}
		t := trigger{table: pgx.Identifier{schema, table}, name: pgx.Identifier{name}}
		switch enabled {
		case "A":
			t.mode = "ALWAYS "
		case "R":
			t.mode = "REPLICA "
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// copyView reads the tables inside a transaction.
type copyView struct {
	tx pgx.Tx
}

func (v copyView) Count(ctx context.Context) (storecopy.Counts, error) {
	counts := make([]string, len(storecopy.AllTables))
	for i, t := range storecopy.AllTables {
		counts[i] = `(SELECT count(*) FROM ` + pgx.Identifier{string(t)}.Sanitize() + `)`
	}
	values := make([]int64, len(storecopy.AllTables))
	dest := make([]any, len(values))
	for i := range values {
		dest[i] = &values[i]
	}
	if err := v.tx.QueryRow(ctx, `SELECT `+strings.Join(counts, ", ")).Scan(dest...); err != nil {
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
		func(rows pgx.Rows) (r storecopy.Resource, err error) {
			err = rows.Scan(&r.ID, &r.Type, &r.Name, &r.Owner, &r.Provisioner, &r.Args, &r.Generation,
				&r.ObservedGeneration, &r.Status, &r.StatusMessage, &r.State, &r.Config, &r.Attempts,
				&r.NextAttemptAt, &r.LastError, &r.LeaseHolder, &r.LeaseExpiresAt, &r.LeaseToken, &r.CreatedAt, &r.UpdatedAt,
				&r.ReadyAt, &r.UnhealthySince, &r.Labels, &r.Paused, &r.Hibernate, &r.RetryRequestedAt, &r.StatusChangedAt,
				&r.Reason, &r.WaitingSince, &r.LastAttemptAt, &r.AdmittedProvisioner, &r.AdmittedUnits)
			return r, err
		},
		func(rows []storecopy.Resource) storecopy.Batch { return storecopy.Batch{Resources: rows} },
	); err != nil {
		return err
	}
	if err := readTable(ctx, v.tx, emit, storecopy.Reservations.ReadQuery(readColumn),
		func(rows pgx.Rows) (r storecopy.Reservation, err error) {
			err = rows.Scan(&r.Provisioner, &r.ResourceID, &r.Owner, &r.Host, &r.Slots, &r.CreatedAt, &r.UpdatedAt)
			return r, err
		},
		func(rows []storecopy.Reservation) storecopy.Batch { return storecopy.Batch{Reservations: rows} },
	); err != nil {
		return err
	}
	if err := readTable(ctx, v.tx, emit, storecopy.Events.ReadQuery(readColumn),
		func(rows pgx.Rows) (r storecopy.Event, err error) {
			err = rows.Scan(&r.Seq, &r.ResourceID, &r.At, &r.Kind, &r.Status, &r.Message)
			return r, err
		},
		func(rows []storecopy.Event) storecopy.Batch { return storecopy.Batch{Events: rows} },
	); err != nil {
		return err
	}
	if err := readTable(ctx, v.tx, emit, storecopy.Changes.ReadQuery(readColumn),
		func(rows pgx.Rows) (r storecopy.Change, err error) {
			err = rows.Scan(&r.Seq, &r.ResourceID, &r.CreatedAt, &r.Owner)
			return r, err
		},
		func(rows []storecopy.Change) storecopy.Batch { return storecopy.Batch{Changes: rows} },
	); err != nil {
		return err
	}
	if err := readTable(ctx, v.tx, emit, storecopy.CapacitySamples.ReadQuery(readColumn),
		func(rows pgx.Rows) (r storecopy.CapacitySample, err error) {
			err = rows.Scan(&r.At, &r.Provisioner, &r.Host, &r.Unit, &r.Total, &r.Used, &r.Down)
			return r, err
		},
		func(rows []storecopy.CapacitySample) storecopy.Batch { return storecopy.Batch{CapacitySamples: rows} },
	); err != nil {
		return err
	}
	if err := readTable(ctx, v.tx, emit, storecopy.CapacityWarnings.ReadQuery(readColumn),
		func(rows pgx.Rows) (r storecopy.CapacityWarning, err error) {
			err = rows.Scan(&r.Provisioner, &r.Kind, &r.Active, &r.Message, &r.Since, &r.UpdatedAt)
			return r, err
		},
		func(rows []storecopy.CapacityWarning) storecopy.Batch { return storecopy.Batch{CapacityWarnings: rows} },
	); err != nil {
		return err
	}
	if err := readTable(ctx, v.tx, emit, storecopy.ProvisionerSpecs.ReadQuery(readColumn),
		func(rows pgx.Rows) (r storecopy.ProvisionerSpec, err error) {
			err = rows.Scan(&r.Provisioner, &r.Fingerprint, &r.AppliedAt)
			return r, err
		},
		func(rows []storecopy.ProvisionerSpec) storecopy.Batch { return storecopy.Batch{ProvisionerSpecs: rows} },
	); err != nil {
		return err
	}
	if err := readTable(ctx, v.tx, emit, storecopy.OwnerPolicies.ReadQuery(readColumn),
		func(rows pgx.Rows) (r storecopy.OwnerPolicy, err error) {
			err = rows.Scan(&r.Owner, &r.Weight, &r.Class, &r.UpdatedAt)
			return r, err
		},
		func(rows []storecopy.OwnerPolicy) storecopy.Batch { return storecopy.Batch{OwnerPolicies: rows} },
	); err != nil {
		return err
	}
	return readTable(ctx, v.tx, emit, storecopy.OwnerQuotas.ReadQuery(readColumn),
		func(rows pgx.Rows) (r storecopy.OwnerQuota, err error) {
			err = rows.Scan(&r.Owner, &r.Provisioner, &r.MaxResources, &r.MaxSlots, &r.UpdatedAt)
			return r, err
		},
		func(rows []storecopy.OwnerQuota) storecopy.Batch { return storecopy.Batch{OwnerQuotas: rows} },
	)
}

// readTable runs query and hands its rows to emit in batches of storecopy.BatchSize.
func readTable[T any](ctx context.Context, tx pgx.Tx, emit func(storecopy.Batch) error, query string,
	scan func(pgx.Rows) (T, error), batch func([]T) storecopy.Batch) error {
	rows, err := tx.Query(ctx, query)
	if err != nil {
		return err
	}
	defer rows.Close()
	return backend.EmitRows(rows, scan, batch, emit)
}

// sequenced are the tables whose seq column a sequence numbers, with what Positions calls
// each.
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
		name, err := v.sequence(ctx, s.table)
		if err != nil {
			return p, err
		}
		// After ALTER SEQUENCE ... RESTART WITH n (and on a fresh sequence, n = 1),
		// is_called is false and n is the next number, not one handed out.
		if err := v.tx.QueryRow(ctx, `SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM `+name).Scan(s.pos(&p)); err != nil {
			return p, fmt.Errorf("read the sequence of %s: %w", s.table, err)
		}
	}
	return p, nil
}

// sequence returns the qualified, quoted name of the sequence of table's seq column.
func (v copyView) sequence(ctx context.Context, table string) (string, error) {
	var name string
	if err := v.tx.QueryRow(ctx, `SELECT pg_get_serial_sequence($1, 'seq')`, table).Scan(&name); err != nil {
		return "", fmt.Errorf("find the sequence of %s: %w", table, err)
	}
	return name, nil
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
	_, err := im.tx.CopyFrom(ctx, pgx.Identifier{string(t)}, t.Columns(), pgx.CopyFromRows(b.Values()))
	return describeDBError(err)
}

// SetPositions restarts each sequence after p's position and after every row's. ALTER
// SEQUENCE ... RESTART, unlike setval, is undone when the transaction rolls back.
func (im copyImporter) SetPositions(ctx context.Context, p storecopy.Positions) error {
	for _, s := range sequenced {
		name, err := im.sequence(ctx, s.table)
		if err != nil {
			return err
		}
		var highest int64
		if err := im.tx.QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM `+pgx.Identifier{s.table}.Sanitize()).Scan(&highest); err != nil {
			return fmt.Errorf("read the highest seq of %s: %w", s.table, err)
		}
		next := max(highest, *s.pos(&p)) + 1
		if _, err := im.tx.Exec(ctx, fmt.Sprintf(`ALTER SEQUENCE %s RESTART WITH %d`, name, next)); err != nil {
			return fmt.Errorf("restart the sequence of %s: %w", s.table, err)
		}
	}
	return nil
}

// readColumn is how a View reads a column: uuid and jsonb columns as text, which is what
// storecopy's rows hold; every other column as it is.
func readColumn(name string) string {
	switch name {
	case "id", "resource_id", "args", "state", "config", "labels":
		return name + "::text"
	}
	return name
}
