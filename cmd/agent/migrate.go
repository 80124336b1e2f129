package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/domain/store"
)

func newMigrateCommand(opts *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Create or upgrade Berth's database schema",
		Long: `Apply every schema migration the database lacks. It is safe to run any number of times and
while agents are running; berth run migrates on start too. The other commands never migrate:
they refuse to work on a database without Berth's schema.`,
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
			if err := st.Migrate(cmd.Context()); err != nil {
				return fmt.Errorf("migrate the database: %w", err)
			}
			where := store.Redact(url)
			if format != outputTable {
				return writeData(cmd.OutOrStdout(), format, map[string]string{"database": where, "schema": "up to date"})
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "schema of %s is up to date\n", where)
			return err
		},
	}
}
