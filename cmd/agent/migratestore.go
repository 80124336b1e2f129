package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/domain/sqlite"
	"github.com/berth-dev/berth/domain/store"
	"github.com/berth-dev/berth/domain/storecopy"
)

// progressEvery is how many rows of a table pass between two progress lines.
const progressEvery = 10 * storecopy.BatchSize

func newMigrateStoreCommand(opts *globalOptions) *cobra.Command {
	var from, to string
	cmd := &cobra.Command{
		Use:   "migrate-store --to URL [--from URL]",
		Short: "Copy everything from one database to another, e.g. from SQLite to PostgreSQL",
		Long: `Copy all of Berth's data from one database (--from) into another (--to), of either kind:
every resource with all its columns and ids (its admission against its owner's quota
included), slot reservations, resource events, the change log, capacity samples and warnings,
provisioner spec fingerprints, owner policies (weights and classes) and owner quotas, so each
owner's quota usage is the same on the target. Not copied: the registered agents (each agent
registers where it runs), the brokers' rate budgets (they start full again) and circuit
breakers (they start closed). Use it to move from the embedded SQLite file to PostgreSQL (for
several agents, or the database's own backups), or back.

--from defaults to the database the other commands use (--database-url, BERTH_DATABASE_URL,
or the default SQLite file). The target's schema is created (as berth migrate does) and the
target must hold no Berth data: migrate-store never overwrites; give it a new database or a
new file. Both databases must be at this berth's schema: run berth migrate on an older source
first.

Stop every agent on the source first, so nothing changes while it is copied: an agent on an
SQLite file is detected and the copy refused; on PostgreSQL, stop the agents yourself
(resources left mid-reconcile keep their leases, which the summary lists). The copy runs in
one transaction on the target and is verified (each table's row count and a checksum of its
rows) before it commits; if anything fails, the target keeps no copied row. Rows are copied
as they are: the target's triggers do not fire, so nothing gets a new generation, event or
change-log entry (on PostgreSQL, turning them off needs the user that owns Berth's tables, the
one that ran berth migrate). Times keep their milliseconds (SQLite stores no finer).

Afterwards, point the agents and the CLI at the target (--database-url or
BERTH_DATABASE_URL) and start the agents: ready resources stay as they are and pending ones
are provisioned. The source is left as it was; remove it once the target serves.`,
		Example: `  # Move the default SQLite store to PostgreSQL (stop berth run first)
  berth migrate-store --to postgres://berth@db.internal:5432/berth
  BERTH_DATABASE_URL=postgres://berth@db.internal:5432/berth berth run --provisioners provisioners.json

  # Between any two stores, with a JSON summary
  berth migrate-store --from sqlite:///var/lib/berth/berth.db --to postgres://berth@db/berth -o json
  berth migrate-store --from postgres://berth@db/berth --to sqlite:///backup/berth.db`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := opts.outputFormat()
			if err != nil {
				return err
			}
			if strings.TrimSpace(to) == "" {
				return usageError(errors.New("--to is required: the database to copy into, e.g. --to postgres://berth@db.internal:5432/berth"))
			}
			if strings.TrimSpace(from) == "" {
				if from, err = opts.resolvedDatabaseURL(); err != nil {
					return err
				}
			}
			res, err := migrateStore(cmd.Context(), from, to, opts.clock.Now(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if format != outputTable {
				return writeData(cmd.OutOrStdout(), format, res.json())
			}
			return res.print(cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&from, "from", "", "database to copy from (default: --database-url, "+envDatabaseURL+", or the default SQLite file)")
	f.StringVar(&to, "to", "", "database to copy into: postgres://... or sqlite:///PATH; it must hold no Berth data")
	return cmd
}

// migrateStoreResult is what migrate-store copied.
type migrateStoreResult struct {
	from, to store.Location
	report   storecopy.Report
}

// migrateStore copies every row of the store at fromURL into the one at toURL, writing
// progress to progress; leases live at now are reported. Its errors never show a password.
func migrateStore(ctx context.Context, fromURL, toURL string, now time.Time, progress io.Writer) (migrateStoreResult, error) {
	from, err := store.Parse(fromURL)
	if err != nil {
		return migrateStoreResult{}, fmt.Errorf("--from: %w", err)
	}
	to, err := store.Parse(toURL)
	if err != nil {
		return migrateStoreResult{}, fmt.Errorf("--to: %w", err)
	}
	if sameStore(from, to) {
		return migrateStoreResult{}, usageError(fmt.Errorf("--from and --to are both %s: give the database to copy into as --to", from))
	}
	if from.Kind == store.SQLite {
		if _, err := os.Stat(from.Path); err != nil {
			return migrateStoreResult{}, fmt.Errorf("--from: %s: %w", from, err)
		}
	}
	for _, end := range []struct {
		name string
		loc  store.Location
	}{{"source", from}, {"target", to}} {
		release, err := store.LockAgent(end.loc.URL)
		if err != nil {
			var running *sqlite.AgentRunningError
			if errors.As(err, &running) {
				return migrateStoreResult{}, fmt.Errorf("the %s, %s, is in use by %s: stop every agent on it first, then run migrate-store again",
					end.name, end.loc, agentName(running.PID))
			}
			return migrateStoreResult{}, fmt.Errorf("the %s, %s: %w", end.name, end.loc, err)
		}
		defer func() { _ = release() }()
	}

	src, err := openCopyStore(ctx, from)
	if err != nil {
		return migrateStoreResult{}, fmt.Errorf("open the source: %w", err)
	}
	defer src.Close()
	dst, err := openCopyStore(ctx, to)
	if err != nil {
		return migrateStoreResult{}, fmt.Errorf("open the target: %w", err)
	}
	defer dst.Close()
	if err := dst.Migrate(ctx); err != nil {
		return migrateStoreResult{}, fmt.Errorf("create the schema of the target, %s: %w", to, err)
	}
	fmt.Fprintf(progress, "copying %s into %s\n", from, to)
	report, err := storecopy.Copy(ctx, src, dst, storecopy.Options{
		Now: now,
		Progress: func(p storecopy.Progress) {
			if p.Copied == p.Total || p.Copied%progressEvery == 0 {
				fmt.Fprintf(progress, "  %-18s %d/%d\n", p.Table, p.Copied, p.Total)
			}
		},
	})
	var notEmpty *storecopy.NotEmptyError
	switch {
	case errors.As(err, &notEmpty):
		return migrateStoreResult{}, fmt.Errorf("nothing copied: %w; give --to a new database or SQLite file", err)
	case err != nil:
		return migrateStoreResult{}, fmt.Errorf("copy %s into %s: %w (the target keeps no copied row)", from, to, err)
	}
	return migrateStoreResult{from: from, to: to, report: report}, nil
}

// copyStore is an open store that can be copied to and from.
type copyStore interface {
	store.DB
	storecopy.Store
}

func openCopyStore(ctx context.Context, loc store.Location) (copyStore, error) {
	db, err := store.Open(ctx, loc.URL, store.Options{MaxConns: 2})
	if err != nil {
		return nil, err
	}
	cs, ok := db.(copyStore)
	if !ok {
		db.Close()
		return nil, fmt.Errorf("%s: this store cannot be copied", loc)
	}
	return cs, nil
}

// sameStore reports whether a and b are the same database: the same file, or the same URL.
func sameStore(a, b store.Location) bool {
	if a.Kind != b.Kind {
		return false
	}
	if a.Kind == store.SQLite {
		if a.Path == b.Path {
			return true
		}
		ia, errA := os.Stat(a.Path)
		ib, errB := os.Stat(b.Path)
		return errA == nil && errB == nil && os.SameFile(ia, ib)
	}
	return strings.TrimSpace(a.URL) == strings.TrimSpace(b.URL)
}

func agentName(pid int) string {
	if pid > 0 {
		return fmt.Sprintf("a berth agent (pid %d)", pid)
	}
	return "a berth agent"
}

// print writes the summary: each table's rows, the positions, leases left live, and what to
// do next.
func (r migrateStoreResult) print(w io.Writer) error {
	fmt.Fprintf(w, "copied %s into %s; every table verified\n\n", r.from, r.to)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TABLE\tROWS\tCHECKSUM")
	for _, t := range r.report.Tables {
		sum := "-"
		if t.Rows > 0 {
			sum = t.Checksum.String()
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\n", t.Table, t.Rows, sum)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nchange log continues after %d, events after %d\n", r.report.Positions.ChangeLog, r.report.Positions.Events)
	for _, l := range r.report.Leases {
		fmt.Fprintf(w, "note: %d resource(s) were mid-reconcile under agent %q (lease until %s): an agent with --agent-id %s resumes them at once, any other after then\n",
			l.Resources, l.Holder, l.Until.UTC().Format(time.RFC3339), l.Holder)
	}
	_, err := fmt.Fprintf(w, "\nnext: run the agents and the CLI with --database-url %s (or BERTH_DATABASE_URL)\n", store.Redact(r.to.URL))
	return err
}

func (r migrateStoreResult) json() any {
	type table struct {
		Table    string `json:"table"`
		Rows     int64  `json:"rows"`
		Checksum string `json:"checksum"`
	}
	type lease struct {
		Holder    string    `json:"holder"`
		Resources int       `json:"resources"`
		Until     time.Time `json:"until"`
	}
	out := struct {
		From      string  `json:"from"`
		To        string  `json:"to"`
		Verified  bool    `json:"verified"`
		Tables    []table `json:"tables"`
		ChangeLog int64   `json:"change_log_position"`
		Events    int64   `json:"events_position"`
		Leases    []lease `json:"live_leases"`
	}{
		From: store.Redact(r.from.URL), To: store.Redact(r.to.URL), Verified: true,
		ChangeLog: r.report.Positions.ChangeLog, Events: r.report.Positions.Events,
		Tables: []table{}, Leases: []lease{},
	}
	for _, t := range r.report.Tables {
		out.Tables = append(out.Tables, table{Table: string(t.Table), Rows: t.Rows, Checksum: t.Checksum.String()})
	}
	for _, l := range r.report.Leases {
		out.Leases = append(out.Leases, lease{Holder: l.Holder, Resources: l.Resources, Until: l.Until.UTC()})
	}
	return out
}
