package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/store"
)

func newMigrateCommand(opts *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Create or upgrade Berth's database schema",
		Long: `Apply every schema migration the database lacks. It is safe to run any number of times and
while agents are running; berth run migrates on start too. The other commands never migrate:
they refuse to work on a database without Berth's schema.

A database whose schema is newer than this build knows (a newer build migrated it) is left
as it is: berth migrate fails naming both versions, and berth run starts without migrating
and claims no work until it is replaced by a build that knows the schema.`,
		Example: `  berth migrate --database-url postgres://berth@localhost:5432/berth
  BERTH_DATABASE_URL=postgres://berth@db.internal/berth berth migrate -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := opts.outputFormat()
			if err != nil {
				return err
			}
			url, err := opts.resolvedDatabaseURL()
			if err != nil {
				return err
			}
			st, err := opts.openState(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			where := store.Redact(url)
			if err := st.Migrate(cmd.Context()); err != nil {
				if tooNew := (*domain.SchemaTooNewError)(nil); errors.As(err, &tooNew) {
					return fmt.Errorf("refusing to migrate %s: its schema is at version %d, newer than this build of Berth knows (%d), and this build's migrations are not the newer one's: run berth migrate of a build that knows schema version %d",
						where, tooNew.Versions.Database, tooNew.Versions.Known, tooNew.Versions.Database)
				}
				return fmt.Errorf("migrate the database: %w", err)
			}
			if format != outputTable {
				return writeData(cmd.OutOrStdout(), format, map[string]string{"database": where, "schema": "up to date"})
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "schema of %s is up to date\n", where)
			return err
		},
	}
}
